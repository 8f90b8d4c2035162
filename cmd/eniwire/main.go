// Command eniwire is the CNI plugin, installed as /opt/cni/bin/eniwire. It wires pods to IPs that
// eniwire-agent hands out; the logic lives in package cni.
package main

import (
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/eniwire/eniwire/cni"
)

// The plugin switches network namespaces on its thread; keeping main on one thread keeps that switch from
// leaking to other goroutines.
func init() { runtime.LockOSThread() }

func main() { skel.PluginMainFuncs(cni.New().Funcs(), cni.Versions, cni.About()) }
