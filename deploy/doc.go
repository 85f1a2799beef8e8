// Package deploy holds what ships beside the afloat binary for running it: Prometheus
// alerting rules equivalent to afloat's built-in alerts (prometheus/afloat-rules.yaml, with
// promtool unit tests in prometheus/afloat-rules.test.yaml) and a Grafana dashboard
// (grafana/afloat-dashboard.json). It has no Go code; its tests check that the files parse,
// that promtool accepts them (when promtool is on PATH; under CI=true it must be), and that
// every metric they name is one afloat exports:
//
//	go test ./deploy
package deploy
