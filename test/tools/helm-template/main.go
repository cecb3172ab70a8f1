// Command helm-template renders a Helm chart as `helm template` does, for the test suite on
// machines without helm (Debian packages none). It uses Go's text/template, the engine Helm
// itself uses, with Helm's built-in objects and the Sprig functions llmgw's chart calls; any
// other function is a parse error, so the chart cannot quietly grow past what this renders.
//
// Go's standard library reads no YAML: the caller gives Chart.yaml and values as JSON.
//
//	helm-template --chart DIR --chart-json FILE --defaults-json FILE [--values-json FILE]...
//	    [--set a.b=v]... [--name NAME] [--namespace NS] [--api-versions G/V]... [--notes]
//
// Output: every manifest as `---\n# Source: <chart>/templates/<file>\n...`, in Helm's install
// order by kind. A failed render prints `Error: execution error at (<file>): <message>` to
// stderr and exits 1, as helm does.
package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// APIVersions is .Capabilities.APIVersions: `.Capabilities.APIVersions.Has "g/v"`.
type APIVersions []string

func (a APIVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

type KubeVersion struct{ Version, Major, Minor string }

type Capabilities struct {
	APIVersions APIVersions
	KubeVersion KubeVersion
}

// The API versions a bare `helm template` knows of (built-in kinds only).
var builtinAPIVersions = []string{
	"v1", "apps/v1", "batch/v1", "policy/v1", "autoscaling/v2", "networking.k8s.io/v1",
	"rbac.authorization.k8s.io/v1", "storage.k8s.io/v1", "apiextensions.k8s.io/v1",
	"coordination.k8s.io/v1", "scheduling.k8s.io/v1", "node.k8s.io/v1",
}

// Helm's install order (pkg/releaseutil/kind_sorter.go); other kinds go last.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
	"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
	"PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
	"ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList",
	"RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController",
	"ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob",
	"IngressClass", "Ingress", "APIService",
}

func main() {
	var valuesFiles, sets, apiVersions multiFlag
	chartDir := flag.String("chart", "", "the chart's directory")
	chartJSON := flag.String("chart-json", "", "Chart.yaml as JSON")
	defaultsJSON := flag.String("defaults-json", "", "the chart's values.yaml as JSON")
	name := flag.String("name", "release-name", "the release name")
	namespace := flag.String("namespace", "default", "the release namespace")
	notes := flag.Bool("notes", false, "render NOTES.txt too")
	flag.Var(&valuesFiles, "values-json", "a values file as JSON (repeatable; later ones win)")
	flag.Var(&sets, "set", "KEY.PATH=VALUE (repeatable; wins over values files)")
	flag.Var(&apiVersions, "api-versions", "an API version the cluster has (repeatable)")
	flag.Parse()
	out, err := render(*chartDir, *chartJSON, *defaultsJSON, valuesFiles, sets, apiVersions, *name, *namespace, *notes)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %s\n", err)
		os.Exit(1)
	}
	os.Stdout.WriteString(out)
}

func readJSON(path string) (map[string]interface{}, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]interface{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m == nil {
		m = map[string]interface{}{}
	}
	return m, nil
}

func render(chartDir, chartJSON, defaultsJSON string, valuesFiles, sets, apiVersions []string, name, namespace string, withNotes bool) (string, error) {
	meta, err := readJSON(chartJSON)
	if err != nil {
		return "", err
	}
	values, err := readJSON(defaultsJSON)
	if err != nil {
		return "", err
	}
	for _, f := range valuesFiles {
		v, err := readJSON(f)
		if err != nil {
			return "", err
		}
		coalesce(values, v)
	}
	for _, s := range sets {
		if err := setValue(values, s); err != nil {
			return "", err
		}
	}
	chartName := str(meta["name"])
	chart := map[string]interface{}{
		"Name": chartName, "Version": str(meta["version"]), "AppVersion": str(meta["appVersion"]),
		"Description": str(meta["description"]), "Type": str(meta["type"]),
		"APIVersion": str(meta["apiVersion"]), "KubeVersion": str(meta["kubeVersion"]),
	}
	top := map[string]interface{}{
		"Values":  values,
		"Chart":   chart,
		"Release": map[string]interface{}{"Name": name, "Namespace": namespace, "Service": "Helm", "IsInstall": true, "IsUpgrade": false, "Revision": 1},
		"Capabilities": &Capabilities{
			APIVersions: append(append(APIVersions{}, builtinAPIVersions...), apiVersions...),
			KubeVersion: KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"},
		},
		"Template": map[string]interface{}{"BasePath": chartName + "/templates"},
	}

	files, err := templateFiles(filepath.Join(chartDir, "templates"))
	if err != nil {
		return "", err
	}
	root := template.New("gotpl").Option("missingkey=zero")
	root.Funcs(funcs(root))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(chartDir, "templates", f))
		if err != nil {
			return "", err
		}
		if _, err := root.New(chartName + "/templates/" + f).Parse(string(b)); err != nil {
			return "", fmt.Errorf("parse error at (%s): %s", chartName+"/templates/"+f, cleanError(err))
		}
	}

	type manifest struct {
		source, body, kind string
		order              int
	}
	var manifests []manifest
	var notesText string
	for i, f := range files {
		base := filepath.Base(f)
		if strings.HasPrefix(base, "_") || (base == "NOTES.txt" && !withNotes) {
			continue
		}
		source := chartName + "/templates/" + f
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, source, top); err != nil {
			return "", fmt.Errorf("execution error at (%s): %s", source, cleanError(err))
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			notesText = text
			continue
		}
		for _, doc := range splitManifests(text) {
			manifests = append(manifests, manifest{source: source, body: doc, kind: kindOf(doc), order: i})
		}
	}
	rank := func(kind string) int {
		for i, k := range installOrder {
			if k == kind {
				return i
			}
		}
		return len(installOrder)
	}
	sort.SliceStable(manifests, func(a, b int) bool { return rank(manifests[a].kind) < rank(manifests[b].kind) })
	var out strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", m.source, m.body)
	}
	if withNotes {
		fmt.Fprintf(&out, "\nNOTES:\n%s\n", notesText)
	}
	return out.String(), nil
}

func templateFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

var separator = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

// Documents with nothing but blank lines and comments are dropped, as Helm drops them.
func splitManifests(text string) []string {
	var docs []string
	for _, d := range separator.Split(text, -1) {
		d = strings.TrimSpace(d)
		meaningful := false
		for _, line := range strings.Split(d, "\n") {
			t := strings.TrimSpace(line)
			if t != "" && !strings.HasPrefix(t, "#") {
				meaningful = true
				break
			}
		}
		if meaningful {
			docs = append(docs, d)
		}
	}
	return docs
}

var kindLine = regexp.MustCompile(`(?m)^kind:\s*(\S+)`)

func kindOf(doc string) string {
	if m := kindLine.FindStringSubmatch(doc); m != nil {
		return m[1]
	}
	return ""
}

// Helm reports `fail` and `required` by their message alone, not Go's call chain.
var calledError = regexp.MustCompile(`error calling (?:fail|required): `)

func cleanError(err error) string {
	msg := err.Error()
	if loc := calledError.FindAllStringIndex(msg, -1); loc != nil {
		return msg[loc[len(loc)-1][1]:]
	}
	return msg
}

// coalesce merges src over dst: maps key by key, a null removes the key (Helm's rule).
func coalesce(dst, src map[string]interface{}) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			coalesce(dm, sm)
		} else {
			dst[k] = v
		}
	}
}

// setValue applies one --set: a dotted path, the value typed as Helm's strvals types it.
func setValue(values map[string]interface{}, s string) error {
	eq := strings.Index(s, "=")
	if eq <= 0 {
		return fmt.Errorf("failed parsing --set data: key %q has no value", s)
	}
	path := strings.Split(s[:eq], ".")
	raw := s[eq+1:]
	var v interface{} = raw
	switch {
	case raw == "true":
		v = true
	case raw == "false":
		v = false
	case raw == "null":
		v = nil
	default:
		if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
			v = n
		}
	}
	node := values
	for _, p := range path[:len(path)-1] {
		next, ok := node[p].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			node[p] = next
		}
		node = next
	}
	last := path[len(path)-1]
	if v == nil {
		delete(node, last)
	} else {
		node[last] = v
	}
	return nil
}

func str(v interface{}) string {
	switch s := v.(type) {
	case nil:
		return ""
	case string:
		return s
	case []byte:
		return string(s)
	case float64:
		return strconv.FormatFloat(s, 'f', -1, 64)
	case error:
		return s.Error()
	case fmt.Stringer:
		return s.String()
	default:
		return fmt.Sprintf("%v", v)
	}
}

func empty(v interface{}) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return r.Len() == 0
	case reflect.Bool:
		return !r.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return r.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return r.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return r.Float() == 0
	case reflect.Ptr, reflect.Interface:
		return r.IsNil()
	}
	return false
}

func toInt(v interface{}) int {
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case float64:
		return int(n)
	case bool:
		if n {
			return 1
		}
		return 0
	case string:
		i, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil {
			return 0
		}
		return i
	}
	return 0
}

func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, x := range t {
			l[i] = deepCopy(x)
		}
		return l
	}
	return v
}

// mergeOverwrite is Sprig's (mergo with override): src's keys win, maps merge key by key.
func mergeOverwrite(dst map[string]interface{}, srcs ...map[string]interface{}) map[string]interface{} {
	for _, src := range srcs {
		for k, v := range src {
			sm, sok := v.(map[string]interface{})
			dm, dok := dst[k].(map[string]interface{})
			if sok && dok {
				mergeOverwrite(dm, sm)
			} else if !empty(v) || dst[k] == nil {
				dst[k] = v
			}
		}
	}
	return dst
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

const alphaNum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randAlphaNum(n int) (string, error) {
	b := make([]byte, n)
	for i := range b {
		x, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphaNum))))
		if err != nil {
			return "", err
		}
		b[i] = alphaNum[x.Int64()]
	}
	return string(b), nil
}

func funcs(root *template.Template) template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data interface{}) (string, error) {
			var buf bytes.Buffer
			err := root.ExecuteTemplate(&buf, name, data)
			return buf.String(), err
		},
		"tpl": func(text string, data interface{}) (string, error) {
			t, err := root.Clone()
			if err != nil {
				return "", err
			}
			t, err = t.New("tpl").Parse(text)
			if err != nil {
				return "", err
			}
			var buf bytes.Buffer
			err = t.Execute(&buf, data)
			return strings.ReplaceAll(buf.String(), "<no value>", ""), err
		},
		"required": func(msg string, v interface{}) (interface{}, error) {
			if v == nil || (reflect.ValueOf(v).Kind() == reflect.String && v.(string) == "") {
				return nil, fmt.Errorf("%s", msg)
			}
			return v, nil
		},
		"fail":   func(msg string) (string, error) { return "", fmt.Errorf("%s", msg) },
		"toYaml": func(v interface{}) string { return strings.TrimSuffix(toYAML(v), "\n") },
		"toJson": func(v interface{}) string { b, _ := json.Marshal(v); return string(b) },
		"indent": indent,
		"nindent": func(n int, s string) string {
			return "\n" + indent(n, s)
		},
		"quote": func(vs ...interface{}) string {
			out := make([]string, 0, len(vs))
			for _, v := range vs {
				if v != nil {
					out = append(out, strconv.Quote(str(v)))
				}
			}
			return strings.Join(out, " ")
		},
		"squote": func(v interface{}) string { return "'" + str(v) + "'" },
		"default": func(d interface{}, given ...interface{}) interface{} {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"empty":   empty,
		"ternary": func(a, b interface{}, c bool) interface{} { return map[bool]interface{}{true: a, false: b}[c] },
		"trunc": func(n int, s string) string {
			if n >= 0 && len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suf, s string) string { return strings.TrimSuffix(s, suf) },
		"trimPrefix": func(pre, s string) string { return strings.TrimPrefix(s, pre) },
		"hasPrefix":  func(pre, s string) bool { return strings.HasPrefix(s, pre) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"lower":      strings.ToLower,
		"upper":      strings.ToUpper,
		"b64enc":     func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
		"sha256sum": func(s string) string {
			h := sha256.Sum256([]byte(s))
			return hex.EncodeToString(h[:])
		},
		"toString": str,
		"int":      toInt,
		"int64":    func(v interface{}) int64 { return int64(toInt(v)) },
		"list":     func(v ...interface{}) []interface{} { return append([]interface{}{}, v...) },
		"append":   func(l []interface{}, v interface{}) []interface{} { return append(append([]interface{}{}, l...), v) },
		"dict": func(kv ...interface{}) map[string]interface{} {
			m := map[string]interface{}{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[str(kv[i])] = kv[i+1]
			}
			return m
		},
		"set": func(m map[string]interface{}, k string, v interface{}) map[string]interface{} { m[k] = v; return m },
		"get": func(m map[string]interface{}, k string) interface{} {
			if v, ok := m[k]; ok {
				return v
			}
			return ""
		},
		"hasKey":         func(m map[string]interface{}, k string) bool { _, ok := m[k]; return ok },
		"deepCopy":       deepCopy,
		"mergeOverwrite": mergeOverwrite,
		"randAlphaNum":   randAlphaNum,
		// helm template talks to no cluster: lookup finds nothing, as there.
		"lookup": func(apiVersion, kind, namespace, name string) map[string]interface{} {
			return map[string]interface{}{}
		},
	}
}
