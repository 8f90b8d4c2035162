package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller/awscni"
)

// metricsGatherer is what /metrics serves: the agent's registry, and with ENIWIRE_AWSCNI_METRICS the AWS VPC
// CNI's awscni_* families computed from it.
func metricsGatherer(reg prometheus.Gatherer, awsCNI bool) prometheus.Gatherer {
	if !awsCNI {
		return reg
	}
	return prometheus.Gatherers{reg, awscni.Translate(reg)}
}
