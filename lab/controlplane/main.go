// kube-lab runs the parts of a Kubernetes control plane the lab needs, from one binary:
//
//	kube-lab etcd --data-dir DIR --listen-client-urls URL --listen-peer-urls URL
//	kube-lab kube-apiserver [kube-apiserver flags]
//	kube-lab kube-controller-manager [flags]
//	kube-lab kube-scheduler [flags]
//	kube-lab certs --dir DIR --server URL [--hosts IP,NAME,...] [--nodes NAME,...]
//
// One binary rather than three: the three commands share most of Kubernetes, so linking them
// once saves build time and disk on small machines. Each subcommand is the upstream command
// itself (its app.New...Command()), so flags and behaviour are those of the released binaries.
package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kube-lab etcd|kube-apiserver|kube-controller-manager|kube-scheduler|certs [flags]")
		os.Exit(2)
	}
	name := os.Args[1]
	// The upstream commands read their flags from os.Args[1:], as their own binaries do.
	os.Args = append([]string{name}, os.Args[2:]...)
	switch name {
	case "etcd":
		os.Exit(runEtcd(os.Args[1:]))
	case "certs":
		os.Exit(runCerts(os.Args[1:]))
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	default:
		fmt.Fprintf(os.Stderr, "kube-lab: unknown command %q\n", name)
		os.Exit(2)
	}
}
