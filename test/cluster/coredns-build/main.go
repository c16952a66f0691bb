// Command coredns is CoreDNS for the one-node test cluster (test/cluster), built by
// install-cluster.sh from the published github.com/coredns/coredns module with only the plugins
// the cluster's Corefile uses. CoreDNS's own main imports core/plugin, which links in every
// plugin (cloud DNS providers among them); a custom build lists its plugins and their order
// itself, as CoreDNS's docs describe for external builds. Not in this build: bind, forward, ...
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The plugins' order in a request, as in CoreDNS's plugin.cfg (ready, health, errors, log,
// cache, kubernetes), whatever their order in the Corefile.
var directives = []string{"ready", "health", "errors", "log", "cache", "kubernetes"}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
