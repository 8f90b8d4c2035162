package controller

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
)

type metrics struct {
	ips          *prometheus.GaugeVec
	enis         *prometheus.GaugeVec
	foreign      prometheus.Gauge
	assigns      *prometheus.CounterVec
	releases     *prometheus.CounterVec
	reconciles   *prometheus.CounterVec
	adopted      prometheus.Counter
	collected    prometheus.Counter
	imdsMissing  prometheus.Gauge
	ipsGone      prometheus.Counter
	podIPsLost   prometheus.Gauge
	stepErrors   *prometheus.CounterVec
	poolBackoffs prometheus.Counter
	refusals     *prometheus.CounterVec
	vanished     prometheus.Counter
	orphans      prometheus.Counter
	ready        prometheus.Gauge
	// prefixFallback is 1 while a fragmented subnet refuses prefixes and the node grows with single IPs.
	prefixFallback prometheus.Gauge
	maxPods        prometheus.Gauge
	// maxENIs and ipsPerENI are the node's limits: what awscni.Translate's awscni_eni_max and awscni_ip_max
	// are computed from.
	maxENIs   prometheus.Gauge
	ipsPerENI prometheus.Gauge
	// setIPs are the pod security-group sets' addresses by set and state; setsBlocked the sets that cannot
	// have one now (no ENI slot, EC2 refusing their groups).
	setIPs      *prometheus.GaugeVec
	setsBlocked prometheus.Gauge
	// journalHealthy is read at each scrape: a broken journal stops the node's rounds, which set the rest.
	journalHealthy prometheus.GaugeFunc
}

// newMetrics registers the node's metrics on reg; journalBroken is the journal's failure, nil while it takes
// writes.
func newMetrics(reg prometheus.Registerer, journalBroken func() error) (*metrics, error) {
	m := &metrics{
		setIPs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eniwire_security_group_set_ips",
			Help: "Pod IPs of the ENIs of each pod security-group set (security groups for pods), by set (its sorted group ids) and state (assigned, warm, cooldown)."}, []string{"set", "state"}),
		setsBlocked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eniwire_security_group_sets_blocked",
			Help: "Pod security-group sets whose pods' ADDs fail now: no ENI slot for them, or EC2 refusing their groups."}),
		ips:         prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eniwire_ips", Help: "Pod IPs in the books (secondary IPs and the addresses of /28 prefixes) by state (assigned, warm, cooldown)."}, []string{"state"}),
		enis:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eniwire_enis", Help: "ENIs in the books by commit state."}, []string{"state"}),
		foreign:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "eniwire_foreign_enis", Help: "ENIs attached to the instance by someone else, left alone."}),
		assigns:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eniwire_assign_total", Help: "Pod IP assignments by result."}, []string{"result"}),
		releases:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eniwire_release_total", Help: "Pod IP releases by result."}, []string{"result"}),
		reconciles:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eniwire_reconcile_total", Help: "Reconciles by result."}, []string{"result"}),
		adopted:     prometheus.NewCounter(prometheus.CounterOpts{Name: "eniwire_enis_adopted_total", Help: "ENIs with our tags found attached but not in the books, adopted."}),
		collected:   prometheus.NewCounter(prometheus.CounterOpts{Name: "eniwire_enis_collected_total", Help: "Leaked available ENIs of ours deleted by the reconciler."}),
		imdsMissing: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eniwire_imds_missing_enis", Help: "Usable ENIs IMDS does not show yet (lag)."}),
		ipsGone: prometheus.NewCounter(prometheus.CounterOpts{Name: "eniwire_ips_gone_total",
			Help: "Free IPs EC2 confirmed no longer on their ENI (unassigned outside eniwire), removed from the books."}),
		podIPsLost: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eniwire_pod_ips_missing_in_ec2",
			Help: "IPs pods hold that EC2 no longer lists on their ENI, or whose ENI it shows attached to another instance (their traffic is broken)."}),
		stepErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eniwire_eni_step_errors_total", Help: "Failed ENI commit steps by state and EC2 error code."}, []string{"state", "code"}),
		poolBackoffs: prometheus.NewCounter(prometheus.CounterOpts{Name: "eniwire_pool_backoffs_total",
			Help: "Times the pool manager backed off after a capacity or IAM refusal."}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eniwire_ec2_refusals_total",
			Help: "Definite refusals by EC2 that paused the pool's growth, by action and error code."}, []string{"action", "code"}),
		vanished: prometheus.NewCounter(prometheus.CounterOpts{Name: "eniwire_vanished_pods_released_total",
			Help: "Assignments released because their pod's network namespace was gone (the pod went without a DEL)."}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{Name: "eniwire_orphaned_enis_collected_total",
			Help: "Available ENIs of the cluster whose owner instance was gone, deleted by this node's sweep."}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eniwire_ready", Help: "1 when the journal is replayed and EC2 has answered."}),
		prefixFallback: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eniwire_prefix_fallback",
			Help: "1 while the subnet has no free /28 (InsufficientCidrBlocks) and new room comes as single IPs; prefixes are retried with backoff."}),
		maxPods: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eniwire_max_pods",
			Help: "The most pods the node runs (MAX_PODS, else kubelet's --max-pods for the instance); the pool holds no more IPs."}),
		maxENIs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eniwire_max_enis",
			Help: "The most ENIs the node holds, primary included (MAX_ENI, else the instance type's limit)."}),
		ipsPerENI: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eniwire_ips_per_eni",
			Help: "Pod IPs one ENI holds at most: its secondary addresses, 16 per slot in prefix mode."}),
		journalHealthy: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eniwire_journal_healthy",
			Help: "1 while the journal takes writes; 0 once a write failed (the agent then exits and its restart replays the journal)."},
			func() float64 {
				if journalBroken() != nil {
					return 0
				}
				return 1
			}),
	}
	for _, c := range []prometheus.Collector{m.ips, m.enis, m.setIPs, m.setsBlocked, m.foreign, m.assigns, m.releases, m.reconciles, m.adopted,
		m.collected, m.imdsMissing, m.ipsGone, m.podIPsLost, m.stepErrors, m.poolBackoffs, m.refusals, m.vanished, m.orphans, m.ready, m.prefixFallback, m.maxPods,
		m.maxENIs, m.ipsPerENI, m.journalHealthy} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	// Every result starts at 0: a series born at 1 shows no increase(), and the alerts read the first "no IP yet".
	for _, r := range assignResults {
		m.assigns.WithLabelValues(r)
	}
	for _, r := range releaseResults {
		m.releases.WithLabelValues(r)
	}
	return m, nil
}

// The values of eniwire_assign_total's and eniwire_release_total's result label (ipam.go counts with them).
var (
	assignResults  = []string{"ok", "repeat", "no_ip", "max_pods", "error"}
	releaseResults = []string{"ok", "unknown", "error"}
)

func (m *metrics) observeReconcile(rep eni.Report, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.reconciles.WithLabelValues(result).Inc()
	m.foreign.Set(float64(len(rep.Foreign)))
	m.adopted.Add(float64(len(rep.Adopted)))
	m.collected.Add(float64(len(rep.Collected)))
	m.imdsMissing.Set(float64(len(rep.IMDSMissing)))
	m.ipsGone.Add(float64(len(rep.GoneIPs)))
	if err == nil || rep.Attached > 0 {
		m.podIPsLost.Set(float64(len(rep.LostPodIPs)))
	}
}

// refresh sets the gauges from the node's status s; called once per pool round, not per request.
func (m *metrics) refresh(s *api.Status) {
	m.ips.WithLabelValues("assigned").Set(float64(s.Assigned))
	m.ips.WithLabelValues("warm").Set(float64(s.Warm))
	m.ips.WithLabelValues("cooldown").Set(float64(s.Cooldown))
	m.maxPods.Set(float64(s.MaxPods))
	m.maxENIs.Set(float64(s.MaxENIs))
	perSlot := 1
	if s.PrefixDelegation {
		perSlot = journal.PrefixAddrs
	}
	m.ipsPerENI.Set(float64(s.IPsPerENI * perSlot))
	m.enis.Reset()
	for _, e := range s.ENIs {
		m.enis.WithLabelValues(e.State).Inc()
	}
	m.setIPs.Reset()
	blocked := 0
	for _, g := range s.SecurityGroupSets {
		m.setIPs.WithLabelValues(g.Set, "assigned").Set(float64(g.Assigned))
		m.setIPs.WithLabelValues(g.Set, "warm").Set(float64(g.Warm))
		m.setIPs.WithLabelValues(g.Set, "cooldown").Set(float64(g.Cooldown))
		if g.Blocked != "" {
			blocked++
		}
	}
	m.setsBlocked.Set(float64(blocked))
	if s.Ready {
		m.ready.Set(1)
	}
}
