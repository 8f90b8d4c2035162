package subnet

// ENIConfig is what custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG) puts on a node's new ENIs: the
// ENIConfig custom resource (crd.k8s.amazonaws.com/v1alpha1) chosen for the node by its label or annotation.
type ENIConfig struct {
	// Name of the ENIConfig object.
	Name string
	// Subnet is spec.subnet: the subnet every new ENI of the node is created in. It must be in the node's zone.
	Subnet string
	// SecurityGroups is spec.securityGroups; empty means the node's primary ENI's groups.
	SecurityGroups []string
}

// ENIConfigSource says which ENIConfig applies to this node now. The agent wires one that watches the node
// and the ENIConfigs through the Kubernetes API (package eniconfig); tests wire their own.
type ENIConfigSource interface {
	// Current is the ENIConfig chosen for the node now. ok is false while the node names none, or names one
	// that does not exist (yet); why says which, for the status line.
	Current() (c ENIConfig, ok bool, why string)
	// Err is the last error of the API server connection, nil while the watch is healthy. Current keeps
	// answering from what it last saw meanwhile.
	Err() error
}
