// Command pause is the sandbox image's only binary for the CRI tests: it holds the pod's namespaces open
// until it is told to stop, as the pause container does on a real node.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
