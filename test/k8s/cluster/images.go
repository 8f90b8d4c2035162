package cluster

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/eniwire/eniwire/test/ociimage"
)

// The images' names. Pods name them with imagePullPolicy IfNotPresent (the manifests' own policy), so
// kubelet uses what the harness imported and never tries a registry.
const (
	PauseImage       = "registry.k8s.io/pause:3.10"
	CoreDNSImage     = "registry.k8s.io/coredns/coredns:v1.12.4"
	AgnhostImage     = "registry.k8s.io/e2e-test-images/agnhost:2.56"
	EniwireImage     = "ghcr.io/eniwire/eniwire:k8s-test"
	EniwireNextImage = "ghcr.io/eniwire/eniwire:k8s-test-next"
)

// The names Kubernetes' e2e suite (k8s.io/kubernetes/test/utils/image, v1.34.2) asks for beyond agnhost. Its
// pause is a newer tag of the same image; busybox and jessie-dnsutils are the toolbox (toolbox.go); nginx is
// a stand-in, agnhost's netexec serving HTTP on port 80, which is all the suite's network tests ask of it.
const (
	E2EPauseImage          = "registry.k8s.io/pause:3.10.1"
	E2EBusyboxImage        = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
	E2EJessieDnsutilsImage = "registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7"
	E2ENginxImage          = "registry.k8s.io/e2e-test-images/nginx:1.14-4"
)

// writeImages writes every image archive into dir and returns their paths.
func writeImages(repoRoot, dir string, b Binaries) ([]string, error) {
	single := func(tag, bin, at string, entrypoint ...string) (ociimage.Image, error) {
		f, err := ociimage.FromBinary(bin, at)
		return ociimage.Image{Tags: []string{tag}, Files: append([]ociimage.File{f}, distroless...), Entrypoint: entrypoint}, err
	}
	toolbox, err := toolboxFiles()
	if err != nil {
		return nil, err
	}
	withToolbox := func(tag string, extra []ociimage.File, entrypoint, cmd []string) ociimage.Image {
		return ociimage.Image{Tags: []string{tag}, Files: append(append([]ociimage.File(nil), toolbox...), extra...),
			Entrypoint: entrypoint, Cmd: cmd, Env: toolboxEnv}
	}
	agnhost, err := ociimage.FromBinary(b.Agnhost, "/agnhost")
	if err != nil {
		return nil, err
	}
	var images []ociimage.Image
	for _, mk := range []func() (ociimage.Image, error){
		func() (ociimage.Image, error) {
			im, err := single(PauseImage, b.Pause, "/pause", "/pause")
			im.Tags = append(im.Tags, E2EPauseImage)
			return im, err
		},
		func() (ociimage.Image, error) { return single(CoreDNSImage, b.CoreDNS, "/coredns", "/coredns") },
		// agnhost as its Dockerfile makes it: the binary at /agnhost on a userland with a shell and DNS tools.
		func() (ociimage.Image, error) {
			return withToolbox(AgnhostImage, []ociimage.File{agnhost}, []string{"/agnhost"}, nil), nil
		},
		func() (ociimage.Image, error) { return withToolbox(E2EBusyboxImage, nil, nil, []string{"sh"}), nil },
		func() (ociimage.Image, error) {
			return withToolbox(E2EJessieDnsutilsImage, nil, nil, []string{"sh"}), nil
		},
		func() (ociimage.Image, error) {
			return withToolbox(E2ENginxImage, []ociimage.File{agnhost}, []string{"/agnhost", "netexec", "--http-port=80", "--udp-port=-1"}, nil), nil
		},
		func() (ociimage.Image, error) {
			return ImageFromDockerfile(repoRoot, b.Eniwire, []string{EniwireImage})
		},
		func() (ociimage.Image, error) {
			return ImageFromDockerfile(repoRoot, b.EniwireNext, []string{EniwireNextImage})
		},
	} {
		im, err := mk()
		if err != nil {
			return nil, err
		}
		images = append(images, im)
	}
	var paths []string
	for i, im := range images {
		p := filepath.Join(dir, fmt.Sprintf("image-%d.tar", i))
		if err := im.WriteArchive(p); err != nil {
			return nil, fmt.Errorf("writing %s: %w", im.Tags[0], err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// importImages loads the archives into the node's containerd.
func (n *Node) importImages(ctx context.Context, archives []string) error {
	for _, a := range archives {
		if out, err := n.Ctr(ctx, "images", "import", a); err != nil {
			return fmt.Errorf("importing %s on %s: %w: %s", a, n.Name, err, out)
		}
	}
	return nil
}
