// Command floorplugin is the least a CNI plugin written in Go does: it reads its config from stdin, decodes it,
// and prints an empty result for ADD. BenchmarkAddDelVersusReferencePtp runs it through libcni beside eniwire
// and the reference plugins, so the bench shows what any Go plugin costs on the machine (exec, the Go runtime's
// start and exit, libcni) before it does any work.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floorplugin:", err)
		os.Exit(1)
	}
}

func run() error {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		return fmt.Errorf("decoding the config: %w", err)
	}
	if os.Getenv("CNI_COMMAND") != "ADD" {
		return nil
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": conf.CNIVersion, "ips": []any{}})
}
