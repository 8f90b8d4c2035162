package controller_test

import (
	"testing"

	"github.com/eniwire/eniwire/controller"
)

func TestMaxPodsIsTheSettingElseWhatTheENIsHold(t *testing.T) {
	m5large := controller.NodeInfo{MaxENIs: 3, IPv4PerENI: 10}
	for _, c := range []struct {
		name string
		cfg  controller.Config
		want int
	}{
		{"MAX_PODS when set", controller.Config{MaxPods: 17}, 17},
		{"else ENIs x (IPs per ENI - 1) + 2", controller.Config{}, 3*9 + 2},
		{"with MAX_ENI counting only the ENIs the node may hold", controller.Config{MaxENI: 2}, 2*9 + 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := controller.MaxPods(c.cfg, m5large); got != c.want {
				t.Errorf("MaxPods = %d, want %d", got, c.want)
			}
		})
	}
}
