package deploy

import (
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The ENIConfig resource the agent watches (controller/eniconfig), as the AWS VPC CNI defines it.
const (
	eniConfigGroup  = "crd.k8s.amazonaws.com"
	eniConfigPlural = "eniconfigs"
)

func TestTheENIConfigCRDIsTheAWSVPCCNIs(t *testing.T) {
	crd := theOne(t, "CustomResourceDefinition", decodeAll(t, readDir(t, "manifests")).crds)
	s := crd.Spec
	if crd.Name != eniConfigPlural+"."+eniConfigGroup || s.Group != eniConfigGroup || s.Scope != apiextensionsv1.ClusterScoped ||
		s.Names.Kind != "ENIConfig" || s.Names.Plural != eniConfigPlural {
		t.Errorf("name %s, group %s, scope %s, names %+v", crd.Name, s.Group, s.Scope, s.Names)
	}
	if len(s.Versions) != 1 || s.Versions[0].Name != "v1alpha1" || !s.Versions[0].Served || !s.Versions[0].Storage ||
		s.Versions[0].Schema == nil || s.Versions[0].Schema.OpenAPIV3Schema == nil {
		t.Fatalf("versions %+v, want v1alpha1 served and stored, with a schema", s.Versions)
	}
	spec := s.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if spec.Properties["subnet"].Type != "string" || len(spec.Required) != 1 || spec.Required[0] != "subnet" {
		t.Errorf("spec.subnet %+v, required %v: want a required string", spec.Properties["subnet"], spec.Required)
	}
	if groups := spec.Properties["securityGroups"]; groups.Type != "array" || groups.Items == nil || groups.Items.Schema.Type != "string" {
		t.Errorf("spec.securityGroups %+v, want an array of strings", groups)
	}
}

// Helm installs the chart's crds/ before its templates and never deletes them; they are the manifest's.
func TestTheChartCarriesTheManifestsCRD(t *testing.T) {
	sameFile(t, filepath.Join("manifests", "eniconfig-crd.yaml"), filepath.Join(chartDir, "crds", "eniconfig.yaml"))
}
