package edge

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	requests *prometheus.CounterVec
	// protocols counts requests by the protocol they came over (h3 next
	// to h2 and http/1.1: is Alt-Svc followed?).
	protocols  *prometheus.CounterVec
	latency    prometheus.Histogram
	bytesIn    prometheus.Counter
	bytesOut   prometheus.Counter
	websockets prometheus.Gauge
	autoStarts *prometheus.CounterVec
	holdTime   prometheus.Histogram
	held       prometheus.Gauge
	// acceptRetries counts the HTTPS listener's temporary accept
	// failures (EMFILE under a flood), each waited out.
	acceptRetries prometheus.Counter
	// inbox counts requests inboxes took or refused; deliveries their
	// attempts' outcomes.
	inbox, deliveries *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) metrics {
	m := metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "froog_edge_requests_total", Help: "Requests by status class."}, []string{"class"}),
		protocols: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "froog_edge_protocol_requests_total",
			Help: "Requests by the protocol they came over (http/1.1, h2, h3)."}, []string{"proto"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "froog_edge_request_duration_seconds",
			Help: "From a request's head to the end of its answer (to the upgrade, for websockets).", Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14)}),
		bytesIn:    prometheus.NewCounter(prometheus.CounterOpts{Name: "froog_edge_request_bytes_total", Help: "Request body bytes received."}),
		bytesOut:   prometheus.NewCounter(prometheus.CounterOpts{Name: "froog_edge_response_bytes_total", Help: "Response body bytes sent."}),
		websockets: prometheus.NewGauge(prometheus.GaugeOpts{Name: "froog_edge_websockets_open", Help: "Open websocket (upgraded) connections."}),
		autoStarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "froog_edge_auto_starts_total", Help: "Requests held for a stopped sandbox, by outcome (started, failed, refused, timed_out)."}, []string{"outcome"}),
		holdTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "froog_edge_hold_seconds", Help: "How long requests were held while their sandbox started.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "froog_edge_requests_held", Help: "Requests held now, waiting for their sandbox to start."}),
		acceptRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "froog_edge_accept_retries_total",
			Help: "Temporary accept failures of the HTTPS listener (out of descriptors: EMFILE), each waited out before accepting again."}),
		inbox: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "froog_edge_inbox_requests_total",
			Help: "Requests URLs' webhook inboxes took, by outcome (stored, signature_refused, too_large, full, unavailable)."}, []string{"outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "froog_edge_inbox_attempts_total",
			Help: "Delivery attempts of inboxes' requests, by outcome (delivered, retry, failed)."}, []string{"outcome"}),
	}
	if r != nil {
		r.MustRegister(m.requests, m.protocols, m.latency, m.bytesIn, m.bytesOut, m.websockets, m.autoStarts, m.holdTime, m.held, m.acceptRetries, m.inbox, m.deliveries)
	}
	return m
}

// registerTraffic adds what the request rings hold (traffic.go), read
// when scraped.
func registerTraffic(r prometheus.Registerer, t *rings) {
	if r != nil {
		r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "froog_edge_traffic_bytes",
			Help: "Bytes URLs' request rings hold on this edge, exchanges and captures, as their bound (64 MiB) counts them."},
			func() float64 { return float64(t.usage()) }))
	}
}
