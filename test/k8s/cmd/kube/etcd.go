package main

import (
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/embed"
)

// newEtcdCommand runs a single-member etcd, embedded, listening for clients and for its (absent) peers on
// loopback URLs.
func newEtcdCommand() *cobra.Command {
	var dataDir, clientURL, peerURL string
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "a single-member etcd for the test cluster",
		RunE: func(*cobra.Command, []string) error {
			cfg := embed.NewConfig()
			cfg.Dir = dataDir
			u, err := url.Parse(clientURL)
			if err != nil {
				return fmt.Errorf("parsing --listen-client-url: %w", err)
			}
			cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*u}, []url.URL{*u}
			peer, _ := url.Parse(peerURL)
			cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
			cfg.InitialCluster = cfg.Name + "=" + peer.String()
			cfg.LogLevel = "warn"
			e, err := embed.StartEtcd(cfg)
			if err != nil {
				return fmt.Errorf("starting etcd: %w", err)
			}
			defer e.Close()
			select {
			case <-e.Server.ReadyNotify():
				fmt.Fprintln(os.Stderr, "etcd: ready on", clientURL)
			case <-time.After(60 * time.Second):
				return fmt.Errorf("etcd: not ready after 60s")
			}
			stop := make(chan os.Signal, 1)
			signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
			select {
			case err := <-e.Err():
				return err
			case <-stop:
				return nil
			}
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "etcd's data directory")
	cmd.Flags().StringVar(&clientURL, "listen-client-url", "http://127.0.0.1:2379", "client URL")
	cmd.Flags().StringVar(&peerURL, "listen-peer-url", "http://127.0.0.1:2380", "peer URL (a single member: nothing dials it)")
	return cmd
}
