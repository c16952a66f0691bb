// Command pause is the pod sandbox ("pause") container of the one-node test cluster: it holds the
// pod's namespaces, reaps the zombies it inherits as PID 1, and exits on SIGINT or SIGTERM. The
// upstream registry.k8s.io/pause is a few lines of C doing the same; no image registry is
// reachable from the test machines, so install-cluster.sh builds this one statically and packs it
// as an OCI image with umoci.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every exited child (orphans re-parented to us in the pod's PID namespace).
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
