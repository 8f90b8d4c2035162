package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

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
	agnhost, err := agnhostFiles(repoRoot, b)
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
			return withToolbox(AgnhostImage, agnhost, []string{"/agnhost"}, []string{"pause"}), nil
		},
		func() (ociimage.Image, error) { return withToolbox(E2EBusyboxImage, nil, nil, []string{"sh"}), nil },
		func() (ociimage.Image, error) {
			return withToolbox(E2EJessieDnsutilsImage, nil, nil, []string{"sh"}), nil
		},
		func() (ociimage.Image, error) {
			return withToolbox(E2ENginxImage, agnhost, []string{"/agnhost", "netexec", "--http-port=80", "--udp-port=-1"}, nil), nil
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

// agnhostFiles are what agnhost's Dockerfile (test/images/agnhost in k8s.io/kubernetes) adds to its userland:
// the binary at /agnhost and the agnhost-2 link to it, CoreDNS at /coredns (the DNS specs' own test server;
// the cluster's CoreDNS build stands in for the Dockerfile's v1.6.2 release), porter's TLS key pair in /,
// netexec's /uploads, and the user and group the SupplementalGroups tests expect.
func agnhostFiles(repoRoot string, b Binaries) ([]ociimage.File, error) {
	agnhost, err := ociimage.FromBinary(b.Agnhost, "/agnhost")
	if err != nil {
		return nil, err
	}
	coredns, err := ociimage.FromBinary(b.CoreDNS, "/coredns")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join(repoRoot, "test", "k8s")
	dir, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("finding the k8s.io/kubernetes module: %w", err)
	}
	files := []ociimage.File{agnhost, coredns, {Path: "/agnhost-2", Mode: os.ModeSymlink, Data: []byte("agnhost")}, {Path: "/uploads/", Mode: 0o755},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\nuser-defined-in-image:x:1000:\n" +
			"group-defined-in-image:x:50000:user-defined-in-image\n")},
	}
	for _, name := range []string{"localhost.crt", "localhost.key"} {
		f, err := ociimage.FromBinary(filepath.Join(strings.TrimSpace(string(dir)), "test", "images", "agnhost", "porter", name), "/"+name)
		if err != nil {
			return nil, err
		}
		f.Mode = 0o644
		files = append(files, f)
	}
	return files, nil
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
