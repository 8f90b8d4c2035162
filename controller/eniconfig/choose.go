// Package eniconfig tells the controller which ENIConfig applies to this node: it watches the node and the
// ENIConfig custom resources (crd.k8s.amazonaws.com/v1alpha1) through the Kubernetes API and chooses as the
// AWS VPC CNI does.
package eniconfig

import (
	"fmt"

	"github.com/eniwire/eniwire/controller/subnet"
)

// The node's label and annotation that name its ENIConfig unless ENI_CONFIG_LABEL_DEF or
// ENI_CONFIG_ANNOTATION_DEF say otherwise.
const (
	DefaultLabel      = "k8s.amazonaws.com/eniConfig"
	DefaultAnnotation = "k8s.amazonaws.com/eniConfig"
)

// ExternalLabel names the node's ENIConfig ahead of any annotation or label: the AWS VPC CNI reserves it for
// tools that manage ENIConfigs for nodes.
const ExternalLabel = "vpc.amazonaws.com/externalEniConfig"

// fallbackName is the ENIConfig of a node that names none, as in the AWS VPC CNI.
const fallbackName = "default"

// keys are the node's label and annotation that name its ENIConfig; an empty one is not consulted.
type keys struct {
	label, annotation string
}

// nameFor says which ENIConfig a node names and how: the external label wins, then the annotation, then the
// label, and a node with none gets the ENIConfig named "default".
func (k keys) nameFor(labels, annotations map[string]string) (name, how string) {
	if v := labels[ExternalLabel]; v != "" {
		return v, fmt.Sprintf("label %s", ExternalLabel)
	}
	if v, ok := annotations[k.annotation]; ok && k.annotation != "" && v != "" {
		return v, fmt.Sprintf("annotation %s", k.annotation)
	}
	if v, ok := labels[k.label]; ok && k.label != "" && v != "" {
		return v, fmt.Sprintf("label %s", k.label)
	}
	return fallbackName, fmt.Sprintf("node has no label %s", k.label) + k.noAnnotation()
}

func (k keys) noAnnotation() string {
	if k.annotation == "" {
		return ""
	}
	return fmt.Sprintf(" nor annotation %s", k.annotation)
}

// parsed is one ENIConfig object as decoded, or why it is unusable.
type parsed struct {
	config subnet.ENIConfig
	err    error
}

// choose picks the node's ENIConfig among configs (by name); when none applies, why says which is missing.
func (k keys) choose(labels, annotations map[string]string, configs map[string]parsed) (c subnet.ENIConfig, ok bool, why string) {
	name, how := k.nameFor(labels, annotations)
	p, found := configs[name]
	switch {
	case !found && name == fallbackName:
		return c, false, fmt.Sprintf("%s, and ENIConfig %s not found", how, name)
	case !found:
		return c, false, fmt.Sprintf("ENIConfig %s not found (named by the node's %s)", name, how)
	case p.err != nil:
		return c, false, p.err.Error()
	}
	return p.config, true, fmt.Sprintf("ENIConfig %s (%s)", name, how)
}
