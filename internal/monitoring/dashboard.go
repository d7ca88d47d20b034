package monitoring

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// PanelQuery is one PromQL query of a Grafana dashboard panel.
type PanelQuery struct {
	Panel, RefID, Expr string
}

type dashboardPanel struct {
	Title   string           `json:"title"`
	Type    string           `json:"type"`
	Panels  []dashboardPanel `json:"panels"` // a collapsed row's panels
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// DashboardQueries returns every PromQL query of a Grafana dashboard JSON model, rows'
// panels included, in panel order.
func DashboardQueries(model []byte) ([]PanelQuery, error) {
	var d struct {
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(model, &d); err != nil {
		return nil, fmt.Errorf("parse dashboard: %w", err)
	}
	var out []PanelQuery
	var walk func([]dashboardPanel) error
	walk = func(panels []dashboardPanel) error {
		for _, p := range panels {
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("panel %q, query %s: empty expr", p.Title, t.RefID)
				}
				out = append(out, PanelQuery{Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	return out, nil
}

// ExpandVariables replaces Grafana's $name and ${name} variables in expr with vars' values,
// longest names first (so $__rate_interval is not read as $__rate).
func ExpandVariables(expr string, vars map[string]string) string {
	pairs := make([]string, 0, 4*len(vars))
	for _, name := range sortedByLengthDesc(vars) {
		pairs = append(pairs, "${"+name+"}", vars[name], "$"+name, vars[name])
	}
	return strings.NewReplacer(pairs...).Replace(expr)
}

func sortedByLengthDesc(vars map[string]string) []string {
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return names
}
