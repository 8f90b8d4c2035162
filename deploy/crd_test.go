package deploy

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// The custom resources the agent watches, as their owners define them: the ENIConfig of custom networking
// (controller/eniconfig) is the AWS VPC CNI's, the SecurityGroupPolicy of security groups for pods
// (controller/podsg) the AWS VPC resource controller's, the ClusterNetworkPolicy (netpol/cnp reads it; its
// watch is under way) kubernetes-sigs/network-policy-api's.
const (
	eniConfigGroup  = "crd.k8s.amazonaws.com"
	eniConfigPlural = "eniconfigs"
	sgpGroup        = "vpcresources.k8s.aws"
	sgpPlural       = "securitygrouppolicies"
	cnpGroup        = "policy.networking.k8s.io"
	cnpPlural       = "clusternetworkpolicies"
)

// crdFiles are each CRD's manifest and the chart's copy of it.
var crdFiles = []struct{ manifest, chart string }{
	{"eniconfig-crd.yaml", "eniconfig.yaml"},
	{"securitygrouppolicy-crd.yaml", "securitygrouppolicy.yaml"},
	{"clusternetworkpolicy-crd.yaml", "clusternetworkpolicy.yaml"},
}

// crdNamed returns the manifests' CRD of that name, failing the test when there is none.
func crdNamed(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds := decodeAll(t, readDir(t, "manifests")).crds
	for i := range crds {
		if crds[i].Name == name {
			return &crds[i]
		}
	}
	t.Fatalf("the manifests have no CRD %s", name)
	return nil
}

// crdSchema is one version's schema: as the CRD writes it, and as the API server validates and prunes
// objects with it.
type crdSchema struct {
	root       *apiextensionsv1.JSONSchemaProps
	structural *structuralschema.Structural
}

// spec is the schema of the objects' spec.
func (s crdSchema) spec() apiextensionsv1.JSONSchemaProps { return s.root.Properties["spec"] }

// checkCRD checks what the API server would refuse a CRD for, and what the agent relies on: its names and
// scope; the versions it serves, exactly these, the one named first stored and no other (the API server
// keeps objects in one version); every version's schema, structural; and, for a group of the Kubernetes
// community (*.k8s.io, *.kubernetes.io), the URL of the API's approval. It returns each version's schema
// by its name.
func checkCRD(t *testing.T, group, plural, kind string, scope apiextensionsv1.ResourceScope, stored string, alsoServed ...string) map[string]crdSchema {
	t.Helper()
	crd := crdNamed(t, plural+"."+group)
	s := crd.Spec
	if s.Group != group || s.Scope != scope || s.Names.Kind != kind || s.Names.Plural != plural || s.Names.ListKind != kind+"List" {
		t.Errorf("group %s, scope %s, names %+v", s.Group, s.Scope, s.Names)
	}
	if apihelpers.IsProtectedCommunityGroup(group) {
		if state, reason := apihelpers.GetAPIApprovalState(crd.Annotations); state != apihelpers.APIApproved {
			t.Errorf("the API server refuses the CRD: %s", reason)
		}
	}
	var names []string
	schemas := map[string]crdSchema{}
	for _, v := range s.Versions {
		names = append(names, v.Name)
		if !v.Served || v.Storage != (v.Name == stored) {
			t.Errorf("version %s: served %v, stored %v; want it served, and stored if and only if it is %s", v.Name, v.Served, v.Storage, stored)
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			t.Fatalf("version %s has no schema", v.Name)
		}
		schemas[v.Name] = crdSchema{v.Schema.OpenAPIV3Schema, structural(t, v.Name, v.Schema.OpenAPIV3Schema)}
	}
	slices.Sort(names)
	if want := slices.Sorted(slices.Values(append([]string{stored}, alsoServed...))); !slices.Equal(names, want) {
		t.Fatalf("versions %v, want %v", names, want)
	}
	return schemas
}

// structural returns a version's schema as the API server holds it, failing the test where the API server
// would refuse the CRD for it: a schema that is not structural.
func structural(t *testing.T, version string, root *apiextensionsv1.JSONSchemaProps) *structuralschema.Structural {
	t.Helper()
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(root, &internal, nil); err != nil {
		t.Fatalf("version %s: %v", version, err)
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatalf("the schema of version %s is not structural: %v", version, err)
	}
	if errs := structuralschema.ValidateStructural(nil, s); len(errs) > 0 {
		t.Errorf("the schema of version %s is not structural: %v", version, errs.ToAggregate())
	}
	return s
}

func TestTheManifestsHoldTheCRDsTheAgentWatches(t *testing.T) {
	var names []string
	for _, crd := range decodeAll(t, readDir(t, "manifests")).crds {
		names = append(names, crd.Name)
	}
	slices.Sort(names)
	want := []string{cnpPlural + "." + cnpGroup, eniConfigPlural + "." + eniConfigGroup, sgpPlural + "." + sgpGroup}
	if !slices.Equal(names, want) {
		t.Errorf("CRDs %v, want %v", names, want)
	}
}

func TestTheENIConfigCRDIsTheAWSVPCCNIs(t *testing.T) {
	spec := checkCRD(t, eniConfigGroup, eniConfigPlural, "ENIConfig", apiextensionsv1.ClusterScoped, "v1alpha1")["v1alpha1"].spec()
	if spec.Properties["subnet"].Type != "string" || len(spec.Required) != 1 || spec.Required[0] != "subnet" {
		t.Errorf("spec.subnet %+v, required %v: want a required string", spec.Properties["subnet"], spec.Required)
	}
	if groups := spec.Properties["securityGroups"]; groups.Type != "array" || groups.Items == nil || groups.Items.Schema.Type != "string" {
		t.Errorf("spec.securityGroups %+v, want an array of strings", groups)
	}
}

// The fields of aws/amazon-vpc-resource-controller-k8s's apis/vpcresources/v1beta1 SecurityGroupPolicySpec:
// two optional label selectors and the group ids, at least one.
func TestTheSecurityGroupPolicyCRDIsTheAWSVPCResourceControllers(t *testing.T) {
	spec := checkCRD(t, sgpGroup, sgpPlural, "SecurityGroupPolicy", apiextensionsv1.NamespaceScoped, "v1beta1")["v1beta1"].spec()
	if len(spec.Required) != 0 {
		t.Errorf("spec requires %v; every field is optional (the agent ignores a policy without a selector or groups)", spec.Required)
	}
	for _, name := range []string{"podSelector", "serviceAccountSelector"} {
		t.Run(name+" is a label selector", func(t *testing.T) {
			sel := spec.Properties[name]
			labels := sel.Properties["matchLabels"]
			if sel.Type != "object" || labels.Type != "object" || labels.AdditionalProperties == nil ||
				labels.AdditionalProperties.Schema == nil || labels.AdditionalProperties.Schema.Type != "string" {
				t.Errorf("%s is of type %q, its matchLabels %q of %v: want an object whose matchLabels map strings to strings",
					name, sel.Type, labels.Type, labels.AdditionalProperties)
			}
			exprs := sel.Properties["matchExpressions"]
			if exprs.Type != "array" || exprs.Items == nil || exprs.Items.Schema == nil {
				t.Fatalf("matchExpressions is of type %q, want an array", exprs.Type)
			}
			req := exprs.Items.Schema
			if !slices.Equal(req.Required, []string{"key", "operator"}) || req.Properties["key"].Type != "string" ||
				req.Properties["operator"].Type != "string" || req.Properties["values"].Type != "array" ||
				req.Properties["values"].Items == nil || req.Properties["values"].Items.Schema.Type != "string" {
				t.Errorf("a matchExpressions requirement requires %v, has %v: want key and operator required, values strings",
					req.Required, slices.Sorted(maps.Keys(req.Properties)))
			}
		})
	}
	groups := spec.Properties["securityGroups"].Properties["groupIds"]
	if groups.Type != "array" || groups.Items == nil || groups.Items.Schema.Type != "string" || groups.MinItems == nil || *groups.MinItems != 1 {
		t.Errorf("spec.securityGroups.groupIds is of type %q, minItems %v: want an array of at least one string", groups.Type, groups.MinItems)
	}
	crd := crdNamed(t, sgpPlural+"."+sgpGroup)
	if !slices.Equal(crd.Spec.Names.ShortNames, []string{"sgp"}) || crd.Spec.Names.Singular != "securitygrouppolicy" {
		t.Errorf("names %+v, want singular securitygrouppolicy and short name sgp, as EKS's", crd.Spec.Names)
	}
}

// Helm installs the chart's crds/ before its templates and never deletes them; they are the manifests'.
func TestTheChartCarriesTheManifestsCRDs(t *testing.T) {
	for _, f := range crdFiles {
		sameFile(t, filepath.Join("manifests", f.manifest), filepath.Join(chartDir, "crds", f.chart))
	}
	copies, err := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if err != nil || len(copies) != len(crdFiles) {
		t.Errorf("the chart's crds/ holds %v, want exactly the copies of %v", copies, crdFiles)
	}
}
