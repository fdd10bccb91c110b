package kube

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// clients are the REST clients of one API server: core/v1 (pods, attach)
// and coordination.k8s.io/v1 (the bridge's Lease). Only these two groups
// are in the scheme, which keeps client-go's share of the binary small.
type clients struct {
	cfg       *rest.Config
	core      *rest.RESTClient
	leases    *rest.RESTClient
	params    runtime.ParameterCodec
	namespace string
}

// connect reads the kubeconfig as kubectl does (KUBECONFIG, else
// ~/.kube/config) and falls back to the in-cluster config; namespace ""
// takes the current context's namespace, else "default".
func connect(namespace string) (*clients, error) {
	cfg, ns, err := RESTConfig()
	if err != nil {
		return nil, err
	}
	if namespace == "" {
		namespace = ns
	}
	return clientsFor(cfg, namespace)
}

// clientsFor returns the REST clients of cfg, in namespace.
func clientsFor(cfg *rest.Config, namespace string) (*clients, error) {
	sch := runtime.NewScheme()
	if err := corev1.AddToScheme(sch); err != nil {
		return nil, err
	}
	if err := coordinationv1.AddToScheme(sch); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(sch, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(sch).WithoutConversion()
	client := func(apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
		rc := *cfg
		rc.APIPath = apiPath
		rc.GroupVersion = &gv
		rc.NegotiatedSerializer = codecs
		rc.UserAgent = "bridge"
		return rest.RESTClientFor(&rc)
	}
	core, err := client("/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	leases, err := client("/apis", coordinationv1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	return &clients{cfg: cfg, core: core, leases: leases, params: runtime.NewParameterCodec(sch), namespace: namespace}, nil
}

// RESTConfig reads the kubeconfig as kubectl does (KUBECONFIG, else
// ~/.kube/config), else the in-cluster config, and returns it with the
// current context's namespace ("default" when it names none). Client
// certificate files are read into the config now: client-go watches cert
// files with goroutines that nothing can stop, so a changed certificate
// takes a restart of the bridge instead.
func RESTConfig() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	namespace := "default"
	if err == nil {
		if ns, _, nsErr := cc.Namespace(); nsErr == nil && ns != "" {
			namespace = ns
		}
	} else if ic, icErr := rest.InClusterConfig(); icErr == nil {
		cfg, err = ic, nil
		if ns, nsErr := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); nsErr == nil && len(ns) > 0 {
			namespace = strings.TrimSpace(string(ns))
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes: no cluster configuration (KUBECONFIG, ~/.kube/config or in-cluster): %s", oneLine(err.Error()))
	}
	for _, f := range []struct {
		path *string
		data *[]byte
	}{{&cfg.CertFile, &cfg.CertData}, {&cfg.KeyFile, &cfg.KeyData}} {
		if *f.path == "" {
			continue
		}
		b, err := os.ReadFile(*f.path)
		if err != nil {
			return nil, "", fmt.Errorf("kubernetes: client certificate: %w", err)
		}
		*f.data, *f.path = b, ""
	}
	return cfg, namespace, nil
}

var klogOnce sync.Once

// routeKlog sends client-go's klog output to the bridge's log (stderr,
// zerolog) instead of klog's own stderr format: its info lines at debug
// level, its errors at warn, except the error every ended attach logs
// ("use of closed network connection"), which is expected.
func routeKlog(log zerolog.Logger) {
	klogOnce.Do(func() {
		klog.SetLogger(logr.New(&klogSink{log: log.With().Str("from", "client-go").Logger()}))
	})
}

// klogSink is a logr.LogSink over zerolog.
type klogSink struct {
	log  zerolog.Logger
	name string
}

func (s *klogSink) Init(logr.RuntimeInfo)  {}
func (s *klogSink) Enabled(level int) bool { return s.log.GetLevel() <= zerolog.DebugLevel }
func (s *klogSink) Info(level int, msg string, kv ...any) {
	s.log.Debug().Str("logger", s.name).Fields(kv).Msg(msg)
}
func (s *klogSink) Error(err error, msg string, kv ...any) {
	ev := s.log.Warn()
	if expected(msg) || err != nil && expected(err.Error()) {
		ev = s.log.Debug()
	}
	ev.Err(err).Str("logger", s.name).Fields(kv).Msg(msg)
}

// expected reports client-go's errors that are part of the bridge's normal
// run: the error of a stream the bridge closed itself (an attach ended, its
// websocket's pings failing after it), and leaderelection's first try to
// create the leader Lease, which every standby makes while a leader holds it.
func expected(s string) bool {
	return strings.Contains(s, "use of closed network connection") ||
		strings.HasPrefix(s, "error initially creating leader election record") && strings.Contains(s, "already exists")
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{log: s.log.With().Fields(kv).Logger(), name: s.name}
}
func (s *klogSink) WithName(name string) logr.LogSink {
	return &klogSink{log: s.log, name: strings.TrimPrefix(s.name+"/"+name, "/")}
}

// oneLine is s cut to its first line and at most 300 bytes.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
