// Package deploy holds eniwire's deployment files: the Kubernetes manifests (manifests/), the Helm chart
// (helm/eniwire), the IAM policy and the default CNI conflist. It has no code; its tests check that the
// manifests decode strictly into their Kubernetes types, that the chart renders to the same objects, that
// both set exactly the agent's settings, that the IAM policy covers exactly the EC2 calls the controller
// makes, and that the repository's Dockerfile builds what it copies.
package deploy
