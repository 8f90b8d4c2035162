package podsg

import (
	"slices"
	"testing"
)

// answers is what SecurityGroupsOf must say of each pod of a test: its groups and its policies.
type answers map[string]struct{ groups, policies []string }

// check asks for each pod of want (namespace/name, with its fixture UID) and compares.
func (r *running) check(t *testing.T, want answers) {
	t.Helper()
	for key, w := range want {
		ns, name := splitKey(key)
		groups, policies, err := r.ask(ns, name, "uid-"+name)
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		if !slices.Equal(groups, w.groups) || !slices.Equal(policies, w.policies) {
			t.Errorf("%s: groups %v from %v, want %v from %v", key, groups, policies, w.groups, w.policies)
		}
	}
}

func splitKey(key string) (string, string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

func TestAPolicySelectsThePodsItsPodSelectorMatches(t *testing.T) {
	r := start(t, setup{},
		pod("shop", "web", "", map[string]string{"app": "web"}),
		pod("shop", "api", "", map[string]string{"app": "api"}),
		account("shop", "default", nil),
		sgp("shop", "web-db", policySpec(map[string]string{"app": "web"}, nil, sgB, sgA)))
	r.check(t, answers{
		"shop/web": {[]string{sgA, sgB}, []string{"shop/web-db"}},
		"shop/api": {nil, nil},
	})
}

func TestAPolicySelectsThePodsWhoseServiceAccountItsSelectorMatches(t *testing.T) {
	r := start(t, setup{},
		pod("shop", "orders", "orders", nil),
		pod("shop", "web", "", nil),
		account("shop", "orders", map[string]string{"role": "db-client"}),
		account("shop", "default", nil),
		sgp("shop", "db-clients", policySpec(nil, map[string]string{"role": "db-client"}, sgA)))
	r.check(t, answers{
		"shop/orders": {[]string{sgA}, []string{"shop/db-clients"}},
		"shop/web":    {nil, nil},
	})
}

func TestAPolicyWithBothSelectorsSelectsOnlyThePodsBothMatch(t *testing.T) {
	r := start(t, setup{},
		pod("shop", "both", "orders", map[string]string{"app": "web"}),
		pod("shop", "labels-only", "", map[string]string{"app": "web"}),
		pod("shop", "account-only", "orders", map[string]string{"app": "api"}),
		account("shop", "orders", map[string]string{"role": "db-client"}),
		account("shop", "default", nil),
		sgp("shop", "web-db", policySpec(map[string]string{"app": "web"}, map[string]string{"role": "db-client"}, sgA)))
	r.check(t, answers{
		"shop/both":         {[]string{sgA}, []string{"shop/web-db"}},
		"shop/labels-only":  {nil, nil},
		"shop/account-only": {nil, nil},
	})
}

func TestAnEmptySelectorSelectsEveryPodOfItsNamespaceOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy map[string]any
	}{
		{"an empty podSelector", policySpec(map[string]string{}, nil, sgA)},
		{"an empty serviceAccountSelector", policySpec(nil, map[string]string{}, sgA)},
		{"both empty", policySpec(map[string]string{}, map[string]string{}, sgA)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, setup{},
				pod("shop", "web", "", map[string]string{"app": "web"}),
				pod("shop", "bare", "robot", nil),
				pod("blog", "web", "", map[string]string{"app": "web"}),
				account("shop", "default", nil), account("shop", "robot", map[string]string{"x": "y"}), account("blog", "default", nil),
				sgp("shop", "all", tc.policy))
			r.check(t, answers{
				"shop/web":  {[]string{sgA}, []string{"shop/all"}},
				"shop/bare": {[]string{sgA}, []string{"shop/all"}},
				"blog/web":  {nil, nil},
			})
		})
	}
}

func TestAPodSelectedByTwoPoliciesGetsTheSortedUnionOfTheirGroups(t *testing.T) {
	r := start(t, setup{},
		pod("shop", "web", "orders", map[string]string{"app": "web"}),
		account("shop", "orders", map[string]string{"role": "db-client"}),
		sgp("shop", "z-web", policySpec(map[string]string{"app": "web"}, nil, sgC, sgA)),
		sgp("shop", "a-db", policySpec(nil, map[string]string{"role": "db-client"}, sgB, sgA)))
	r.check(t, answers{"shop/web": {[]string{sgA, sgB, sgC}, []string{"shop/a-db", "shop/z-web"}}})
}

func TestAPolicyOfAnotherNamespaceDoesNotApply(t *testing.T) {
	r := start(t, setup{},
		pod("shop", "web", "", map[string]string{"app": "web"}),
		pod("shop", "api", "", map[string]string{"app": "api"}),
		account("shop", "default", nil), account("blog", "default", nil),
		sgp("blog", "every-pod", policySpec(map[string]string{}, nil, sgA)),
		sgp("shop", "api", policySpec(map[string]string{"app": "api"}, nil, sgB)))
	r.check(t, answers{
		"shop/web": {nil, nil},
		"shop/api": {[]string{sgB}, []string{"shop/api"}},
	})
}
