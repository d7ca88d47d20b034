package charttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
)

// chartDir is the chart under test, relative to this package.
const chartDir = "../outboxkit"

// Release name and namespace of every render.
const (
	releaseName      = "orders"
	releaseNamespace = "apps"
)

// object is one rendered Kubernetes object, with the template it came from.
type object struct {
	Template string
	Doc      map[string]any
}

func (o object) kind() string { return str(o.Doc, "kind") }
func (o object) name() string { return str(o.Doc, "metadata", "name") }

// isHook reports whether the object is a Helm hook (created by helm around install/upgrade,
// not part of the release's manifest).
func (o object) isHook() bool { return str(o.Doc, "metadata", "annotations", "helm.sh/hook") != "" }

// rendering is the chart rendered for one values file.
type rendering struct {
	Objects []object
	Notes   string
}

// find returns the only object of kind and name suffix, failing the test otherwise.
func (r rendering) find(t *testing.T, kind, nameSuffix string) object {
	t.Helper()
	var found []object
	for _, o := range r.Objects {
		if o.kind() == kind && strings.HasSuffix(o.name(), nameSuffix) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s named *%s, found %d", kind, nameSuffix, len(found))
	}
	return found[0]
}

// all returns the objects of kind.
func (r rendering) all(kind string) []object {
	var out []object
	for _, o := range r.Objects {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// loadChart loads the chart directory as `helm install ./deploy/helm/outboxkit` does.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart %s: %v", chartDir, err)
	}
	return ch
}

// readValues reads a values file; "" gives no override (the chart's defaults).
func readValues(t *testing.T, file string) common.Values {
	t.Helper()
	if file == "" {
		return common.Values{}
	}
	vals, err := common.ReadValuesFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return vals
}

// render renders the chart for a Kubernetes version with the values of file on top of the
// chart's defaults, as `helm template` does (schema validation included).
func render(t *testing.T, kubeVersion string, vals common.Values) rendering {
	t.Helper()
	r, err := tryRender(loadChart(t), kubeVersion, vals)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryRender is render returning the error (a template's fail message, a schema violation).
func tryRender(ch *chart.Chart, kubeVersion string, vals common.Values) (rendering, error) {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return rendering{}, fmt.Errorf("kube version %s: %w", kubeVersion, err)
	}
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, kv.String()) {
		return rendering{}, fmt.Errorf("chart kubeVersion %q excludes %s", ch.Metadata.KubeVersion, kv)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	opts := common.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true}
	top, err := util.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, false)
	if err != nil {
		return rendering{}, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return rendering{}, fmt.Errorf("render: %w", err)
	}
	return parseRendered(files)
}

// parseRendered splits the rendered templates into objects (sorted by template and position).
func parseRendered(files map[string]string) (rendering, error) {
	var r rendering
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		base := filepath.Base(name)
		switch {
		case base == "NOTES.txt":
			r.Notes = files[name]
			continue
		case strings.HasPrefix(base, "_"):
			continue
		}
		dec := yaml.NewDecoder(strings.NewReader(files[name]))
		for {
			var doc map[string]any
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return rendering{}, fmt.Errorf("%s: invalid YAML: %w\n%s", name, err, files[name])
			}
			if len(doc) > 0 {
				r.Objects = append(r.Objects, object{Template: name, Doc: doc})
			}
		}
	}
	return r, nil
}

// manifest returns the objects as one multi-document YAML stream.
func manifest(t *testing.T, objs []object) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		buf.WriteString("---\n")
		enc := yaml.NewEncoder(&buf)
		if err := enc.Encode(o.Doc); err != nil {
			t.Fatal(err)
		}
		enc.Close()
	}
	return buf.Bytes()
}

// at walks a decoded YAML document by map keys and list indexes (int).
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// str is at for a string value ("" when absent).
func str(v any, path ...any) string {
	s, _ := at(v, path...).(string)
	return s
}

// list is at for a list value.
func list(v any, path ...any) []any {
	l, _ := at(v, path...).([]any)
	return l
}
