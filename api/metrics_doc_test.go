package api_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
)

// docMetrics returns the metrics of docs/operations.md's table, each with
// its labels as written ("route,method,status"), and the names of the rows
// that say "JetStream only"; limits is the values the row of
// tether_limited_total gives its label.
func docMetrics(t *testing.T) (metrics map[string]string, jetstream map[string]bool, limits []string) {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| metric | what |")
	if !ok {
		t.Fatal(`docs/operations.md has no "| metric | what |" table`)
	}
	metrics, jetstream = map[string]string{}, map[string]bool{}
	name := regexp.MustCompile("`(tether_[a-z_]+)(?:\\{([a-z_,]+)\\})?`")
	value := regexp.MustCompile("`([a-z_]+)`")
	for _, row := range strings.Split(table, "\n")[2:] {
		row = strings.TrimSpace(row)
		if !strings.HasPrefix(row, "|") {
			break
		}
		cells := strings.SplitN(row, " | ", 2)
		for _, m := range name.FindAllStringSubmatch(cells[0], -1) {
			metrics[m[1]] = m[2]
			if strings.HasPrefix(cells[1], "JetStream only") {
				jetstream[m[1]] = true
			}
			if m[1] == "tether_limited_total" {
				what, _, _ := strings.Cut(cells[1], "([")
				for _, v := range value.FindAllStringSubmatch(what, -1) {
					limits = append(limits, v[1])
				}
			}
		}
	}
	if len(metrics) < 20 || len(limits) == 0 {
		t.Fatalf("read %d metrics and %d limits from docs/operations.md", len(metrics), len(limits))
	}
	return metrics, jetstream, limits
}

// /metrics serves every metric of docs/operations.md's table, with the
// labels it names, and no tether_ metric the table does not list. The
// JetStream-only rows are checked on a node on NATS by
// TestDeliveryMetricsOnNATS.
func TestMetricsAreDocumented(t *testing.T) {
	doc, jetstream, limits := docMetrics(t)
	v := newEnv(t, api.Options{})
	v.thread("t1") // a request, so that the request metrics have a series
	body := string(v.mustDo(200, "GET", "/metrics", nil).body)
	served := map[string]bool{}
	sample := regexp.MustCompile(`(?m)^(tether_[a-z_]+?)(?:_bucket|_sum|_count)?(?:\{([^}]*)\})? `)
	labelName := regexp.MustCompile(`([a-z_]+)="`)
	for _, m := range sample.FindAllStringSubmatch(body, -1) {
		n := m[1]
		if _, ok := doc[n]; !ok {
			if _, ok := doc[m[0][:strings.IndexAny(m[0], "{ ")]]; ok {
				n = m[0][:strings.IndexAny(m[0], "{ ")] // a counter named …_count
			}
		}
		served[n] = true
		labels, ok := doc[n]
		if !ok {
			t.Errorf("/metrics serves %s, which docs/operations.md does not list", n)
			continue
		}
		var got []string
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			if l[1] != "le" {
				got = append(got, l[1])
			}
		}
		want := strings.Split(labels, ",")
		if labels == "" {
			want = nil
		}
		slices.Sort(want) // Prometheus writes labels sorted by name
		if !slices.Equal(got, want) {
			t.Errorf("/metrics serves %s with labels {%s}, docs/operations.md says {%s}", n, strings.Join(got, ","), labels)
		}
	}
	for n := range doc {
		if !served[n] && !jetstream[n] {
			t.Errorf("docs/operations.md lists %s, which /metrics does not serve", n)
		}
	}
	// Every limit is served from the start, at 0: a counter that appears
	// only at its first refusal hides that refusal from rate and increase.
	for _, l := range limits {
		if !strings.Contains(body, "\ntether_limited_total{limit=\""+l+"\"} 0\n") {
			t.Errorf("/metrics does not serve tether_limited_total{limit=%q} 0", l)
		}
	}
}
