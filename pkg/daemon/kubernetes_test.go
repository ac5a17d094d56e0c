package daemon_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/cyberos/mcpd/pkg/config"
	"github.com/cyberos/mcpd/pkg/daemon"
)

// The Kubernetes manifests under docs/kubernetes are checked for what they
// promise, since no schema validator runs offline here: every file parses,
// the Deployment runs two non-root replicas of the mcpd image probed on
// /healthz and /readyz, its settings are mcpd's own and make a valid
// configuration, every secret it reads is in secret.yaml, and the Service,
// the PodDisruptionBudget and the migration Job fit it.

var kubeDir = filepath.Join("..", "..", "docs", "kubernetes")

// kubeObject is the part of a manifest the test reads; yaml.v3 decodes
// only these fields, and every document must have apiVersion, kind and a
// name.
type kubeObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"`
	Resources  []string          `yaml:"resources"`
	Images     []struct {
		Name string `yaml:"name"`
	} `yaml:"images"`
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		// A Service's selector is a plain map: loadManifests reads it apart.
		MinAvailable *int     `yaml:"minAvailable"`
		Ports        []kPort  `yaml:"ports"`
		Template     kPodTmpl `yaml:"template"`
	} `yaml:"spec"`
}

type kPort struct {
	Name          string `yaml:"name"`
	Port          int    `yaml:"port"`
	TargetPort    string `yaml:"targetPort"`
	ContainerPort int    `yaml:"containerPort"`
}

type kPodTmpl struct {
	Metadata struct {
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsNonRoot bool `yaml:"runAsNonRoot"`
			RunAsUser    int  `yaml:"runAsUser"`
		} `yaml:"securityContext"`
		Containers []kContainer `yaml:"containers"`
		Volumes    []struct {
			Name   string `yaml:"name"`
			Secret struct {
				SecretName string `yaml:"secretName"`
				Items      []struct {
					Key  string `yaml:"key"`
					Path string `yaml:"path"`
				} `yaml:"items"`
			} `yaml:"secret"`
		} `yaml:"volumes"`
	} `yaml:"spec"`
}

type kProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type kContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom struct {
			SecretKeyRef struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports           []kPort `yaml:"ports"`
	StartupProbe    *kProbe `yaml:"startupProbe"`
	LivenessProbe   *kProbe `yaml:"livenessProbe"`
	ReadinessProbe  *kProbe `yaml:"readinessProbe"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

// loadManifests decodes every document of every YAML file under
// docs/kubernetes, by kind.
func loadManifests(t *testing.T) (map[string][]kubeObject, map[string]map[string]any) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", kubeDir, err)
	}
	byKind := map[string][]kubeObject{}
	services := map[string]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var node yaml.Node
			if err := dec.Decode(&node); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var obj kubeObject
			if err := node.Decode(&obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj.APIVersion == "" || obj.Kind == "" || (obj.Kind != "Kustomization" && obj.Metadata.Name == "") {
				t.Fatalf("%s: a document without apiVersion, kind or metadata.name", f)
			}
			if obj.Kind == "Service" {
				var raw struct {
					Spec struct {
						Selector map[string]any `yaml:"selector"`
					} `yaml:"spec"`
				}
				if err := node.Decode(&raw); err != nil {
					t.Fatal(err)
				}
				services[obj.Metadata.Name] = raw.Spec.Selector
			}
			byKind[obj.Kind] = append(byKind[obj.Kind], obj)
		}
	}
	return byKind, services
}

func one(t *testing.T, byKind map[string][]kubeObject, kind string) kubeObject {
	t.Helper()
	if len(byKind[kind]) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(byKind[kind]), kind)
	}
	return byKind[kind][0]
}

func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	byKind, serviceSelectors := loadManifests(t)
	secrets := map[string]map[string]string{}
	for _, s := range byKind["Secret"] {
		secrets[s.Metadata.Name] = s.StringData
	}
	secretKey := func(name, key string) bool {
		_, ok := secrets[name][key]
		return ok
	}

	// The Deployment.
	dep := one(t, byKind, "Deployment")
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas %v, want 2", dep.Spec.Replicas)
	}
	podLabels := dep.Spec.Template.Metadata.Labels
	if len(dep.Spec.Selector.MatchLabels) == 0 || !subset(dep.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("Deployment selector %v does not select its pods %v", dep.Spec.Selector.MatchLabels, podLabels)
	}
	pod := dep.Spec.Template.Spec
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser == 0 {
		t.Errorf("pod security context %+v: want non-root", pod.SecurityContext)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want mcpd alone", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !strings.HasPrefix(c.Image, "ghcr.io/cyberos/mcpd:") {
		t.Errorf("image %q, want the mcpd image goreleaser publishes", c.Image)
	}
	checkHardened(t, "mcpd", c)
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" {
		t.Fatalf("ports %+v, want one named http", c.Ports)
	}
	for _, p := range []struct {
		name  string
		probe *kProbe
		path  string
	}{{"startup", c.StartupProbe, "/healthz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != "http" {
			t.Errorf("%s probe %+v, want GET %s on port http", p.name, p.probe, p.path)
		}
	}

	// Its settings are mcpd's flags and make a valid configuration.
	fs := pflag.NewFlagSet("mcpd", pflag.ContinueOnError)
	daemon.AddFlags(fs)
	env := map[string]string{}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "MCPD_") {
			t.Errorf("env %s is not a setting of mcpd", e.Name)
			continue
		}
		key := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(e.Name, "MCPD_")), "_", "-")
		if fs.Lookup(key) == nil || config.EnvName(key) != e.Name {
			t.Errorf("env %s names no flag of mcpd", e.Name)
		}
		switch ref := e.ValueFrom.SecretKeyRef; {
		case ref.Name != "":
			if !secretKey(ref.Name, ref.Key) {
				t.Errorf("env %s reads secret %s key %s, which secret.yaml does not define", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = "postgres://mcpd@db.example:5432/mcpd"
		default:
			env[e.Name] = e.Value
		}
	}
	cfg, err := daemon.LoadConfig(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("the Deployment's settings: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the Deployment's settings: %v", err)
	}
	if cfg.Dev || cfg.DatabaseURL == "" || cfg.AuthJWTSecretFile == "" {
		t.Errorf("the Deployment runs without a database or a JWT secret: %+v", cfg)
	}
	_, port, _ := strings.Cut(cfg.Listen, ":")
	if !strings.HasPrefix(cfg.Listen, "0.0.0.0:") || port != strconv.Itoa(c.Ports[0].ContainerPort) {
		t.Errorf("mcpd listens on %s, the container port is %d", cfg.Listen, c.Ports[0].ContainerPort)
	}
	// The pod has time to drain: SIGTERM waits --shutdown-timeout.
	if time.Duration(pod.TerminationGracePeriodSeconds)*time.Second <= cfg.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %d is not longer than --shutdown-timeout %s",
			pod.TerminationGracePeriodSeconds, cfg.ShutdownTimeout)
	}
	// The JWT secret file is the Secret's key, mounted read-only.
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != m.Name || !m.ReadOnly {
				continue
			}
			for _, it := range v.Secret.Items {
				if filepath.Join(m.MountPath, it.Path) == cfg.AuthJWTSecretFile && secretKey(v.Secret.SecretName, it.Key) {
					mounted = true
				}
			}
		}
	}
	if !mounted {
		t.Errorf("%s is not a key of a Secret in secret.yaml mounted read-only", cfg.AuthJWTSecretFile)
	}

	// The Service sends to the ready pods' http port.
	svc := one(t, byKind, "Service")
	sel := map[string]string{}
	for k, v := range serviceSelectors[svc.Metadata.Name] {
		s, _ := v.(string)
		sel[k] = s
	}
	if len(sel) == 0 || !subset(sel, podLabels) {
		t.Errorf("Service selector %v does not select mcpd's pods %v", sel, podLabels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != "http" {
		t.Errorf("Service ports %+v, want one to targetPort http", svc.Spec.Ports)
	}

	// The PodDisruptionBudget keeps one of the two.
	pdb := one(t, byKind, "PodDisruptionBudget")
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != 1 {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	if !subset(pdb.Spec.Selector.MatchLabels, podLabels) || len(pdb.Spec.Selector.MatchLabels) == 0 {
		t.Errorf("PodDisruptionBudget selector %v does not select mcpd's pods", pdb.Spec.Selector.MatchLabels)
	}

	// The migration Job runs mcpctl migrate up with the owner's URL.
	job := one(t, byKind, "Job")
	jobPod := job.Spec.Template.Spec
	if len(jobPod.Containers) != 1 || !jobPod.SecurityContext.RunAsNonRoot {
		t.Fatalf("Job pod %+v: want one non-root container", jobPod)
	}
	jc := jobPod.Containers[0]
	checkHardened(t, "migrate", jc)
	if !strings.HasPrefix(jc.Image, "ghcr.io/cyberos/mcpctl:") || !slices.Equal(jc.Args, []string{"migrate", "up"}) {
		t.Errorf("Job runs %s %v, want the mcpctl image with migrate up", jc.Image, jc.Args)
	}
	urlFromSecret := false
	for _, e := range jc.Env {
		ref := e.ValueFrom.SecretKeyRef
		if e.Name == "MCPCTL_DATABASE_URL" && secretKey(ref.Name, ref.Key) && ref.Name != "mcpd" {
			urlFromSecret = true
		}
	}
	if !urlFromSecret {
		t.Errorf("the Job does not read MCPCTL_DATABASE_URL from a secret of its own in secret.yaml")
	}

	// kustomization.yaml names files that exist, the Secrets and the Job
	// apart (applied on their own).
	kust := one(t, byKind, "Kustomization")
	for _, r := range kust.Resources {
		if _, err := os.Stat(filepath.Join(kubeDir, r)); err != nil {
			t.Errorf("kustomization resource %s: %v", r, err)
		}
		if r == "secret.yaml" || r == "migrate-job.yaml" {
			t.Errorf("kustomization applies %s, which must be applied on its own", r)
		}
	}
}

// checkHardened fails unless c cannot gain privileges, has no
// capabilities and a read-only root file system.
func checkHardened(t *testing.T, name string, c kContainer) {
	t.Helper()
	sc := c.SecurityContext
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !sc.ReadOnlyRootFilesystem ||
		!slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("container %s security context %+v: want no privilege escalation, read-only root, drop ALL", name, sc)
	}
}

func subset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return true
}
