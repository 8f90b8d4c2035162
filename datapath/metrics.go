package datapath

import (
	"github.com/prometheus/client_golang/prometheus"
)

// CounterSource is what the collector reads; *Datapath and *Reader both are one.
type CounterSource interface {
	Counters() ([]Counter, error)
	PodTraffic() ([]PodTraffic, error)
}

// Collector exports the programs' per-CPU counters, summed, to Prometheus at scrape time.
type Collector struct {
	src        CounterSource
	packets    *prometheus.Desc
	bytes      *prometheus.Desc
	podPackets *prometheus.Desc
	podBytes   *prometheus.Desc
}

// NewCollector returns a collector over src. Register it once.
func NewCollector(src CounterSource) *Collector {
	return &Collector{
		src: src,
		packets: prometheus.NewDesc("eniwire_datapath_packets_total",
			"Packets seen by the tc programs, by program and verdict (a redirect counts when the helper accepts it).", []string{"program", "verdict"}, nil),
		bytes: prometheus.NewDesc("eniwire_datapath_bytes_total",
			"Bytes seen by the tc programs, by program and verdict.", []string{"program", "verdict"}, nil),
		podPackets: prometheus.NewDesc("eniwire_pod_packets_total",
			"Packets a pod sent from its own address (tx) or the fast paths redirected towards it (rx; not what the host stack delivers).",
			[]string{"pod_ip", "direction"}, nil),
		podBytes: prometheus.NewDesc("eniwire_pod_bytes_total",
			"Bytes a pod sent from its own address (tx) or the fast paths redirected towards it (rx; not what the host stack delivers).",
			[]string{"pod_ip", "direction"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.packets
	ch <- c.bytes
	ch <- c.podPackets
	ch <- c.podBytes
}

// Collect implements prometheus.Collector. A map that cannot be read yields an invalid metric, so the
// scrape fails loudly instead of reporting zeros.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counters, err := c.src.Counters()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.packets, err)
	}
	for _, k := range counters {
		ch <- prometheus.MustNewConstMetric(c.packets, prometheus.CounterValue, float64(k.Packets), k.Verdict.Program(), k.Verdict.String())
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(k.Bytes), k.Verdict.Program(), k.Verdict.String())
	}
	pods, err := c.src.PodTraffic()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.podPackets, err)
	}
	for _, p := range pods {
		ip := p.IP.String()
		ch <- prometheus.MustNewConstMetric(c.podPackets, prometheus.CounterValue, float64(p.TxPackets), ip, "tx")
		ch <- prometheus.MustNewConstMetric(c.podPackets, prometheus.CounterValue, float64(p.RxPackets), ip, "rx")
		ch <- prometheus.MustNewConstMetric(c.podBytes, prometheus.CounterValue, float64(p.TxBytes), ip, "tx")
		ch <- prometheus.MustNewConstMetric(c.podBytes, prometheus.CounterValue, float64(p.RxBytes), ip, "rx")
	}
}
