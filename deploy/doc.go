// Package deploy holds eniwire's deployment files: the Kubernetes manifests (manifests/), the Helm chart
// (helm/eniwire), the IAM policy, the default CNI conflist and a Grafana dashboard with Prometheus alert rules
// (monitoring/, whose small Go package reads them for the tests). It has no code; its tests check that the
// manifests decode strictly into their Kubernetes types, that the chart renders to the same objects, that both
// set exactly the agent's settings, that the CRDs are their owners' (the ClusterNetworkPolicy one admitting
// every policy of the API's conformance suite), that the IAM policy covers exactly the EC2 calls the
// controller makes, that the dashboard and the alerts read only metrics the agent serves and pass promtool's
// unit tests, and that the repository's Dockerfile builds what it copies.
package deploy
