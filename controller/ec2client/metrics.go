package ec2client

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of one attempt, the values of the outcome label.
const (
	OutcomeSuccess   = "success"
	OutcomeThrottled = "throttled"
	OutcomeError     = "error"
	OutcomeCanceled  = "canceled"
)

// Codes of the code label for attempts that carry no EC2 error code.
const (
	codeNone      = "none"
	codeTransport = "transport"
	codeContext   = "context"
)

type metrics struct {
	calls *prometheus.CounterVec
	// seconds is the time spent in attempts by calls' labels: with calls, the mean duration of each outcome
	// (awscni.Translate's awscni_aws_api_latency_ms, whose error and status labels are outcome and code).
	seconds   *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	throttled *prometheus.CounterVec
	rate      *prometheus.GaugeVec
	wait      *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "eniwire", Subsystem: "ec2", Name: "calls_total",
			Help: "EC2 API attempts by action, outcome (success, throttled, error, canceled) and EC2 error code.",
		}, []string{"action", "outcome", "code"}),
		seconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "eniwire", Subsystem: "ec2", Name: "call_seconds_total",
			Help: "Seconds spent in EC2 API attempts, by action, outcome and EC2 error code (the labels of eniwire_ec2_calls_total).",
		}, []string{"action", "outcome", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "eniwire", Subsystem: "ec2", Name: "call_duration_seconds",
			Help:    "Duration of one EC2 API attempt (SDK retries of transport errors and 5xx included), by action.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}, []string{"action"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "eniwire", Subsystem: "ec2", Name: "throttled_total",
			Help: "EC2 API attempts answered with a throttling error, by action.",
		}, []string{"action"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "eniwire", Subsystem: "ec2", Name: "limiter_rate",
			Help: "Current client-side rate (calls per second) of each action's token bucket, after AIMD cuts.",
		}, []string{"action"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "eniwire", Subsystem: "ec2", Name: "limiter_wait_seconds",
			Help:    "Time an EC2 call waited for its client-side token, by action and priority.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"action", "priority"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.calls, m.seconds, m.duration, m.throttled, m.rate, m.wait} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// observe counts and times one attempt.
func (m *metrics) observe(action string, err error, took time.Duration) {
	outcome, code := outcomeOf(err)
	m.calls.WithLabelValues(action, outcome, code).Inc()
	m.seconds.WithLabelValues(action, outcome, code).Add(took.Seconds())
	m.duration.WithLabelValues(action).Observe(took.Seconds())
	if outcome == OutcomeThrottled {
		m.throttled.WithLabelValues(action).Inc()
	}
}

// outcomeOf is the outcome and code labels of an attempt that ended with err.
func outcomeOf(err error) (outcome, code string) {
	switch {
	case err == nil:
		return OutcomeSuccess, codeNone
	case IsThrottle(err):
		return OutcomeThrottled, ErrorCode(err)
	case ErrorCode(err) != "":
		return OutcomeError, ErrorCode(err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled, codeContext
	default:
		return OutcomeError, codeTransport
	}
}
