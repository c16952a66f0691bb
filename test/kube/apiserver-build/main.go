// Command kube-apiserver is the upstream API server, unchanged: the same entry point as
// Kubernetes' cmd/kube-apiserver, compiled from the published modules pinned in go.mod.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
