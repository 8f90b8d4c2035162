package cluster

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/eniwire/eniwire/test/ociimage"
)

// The toolbox is the userland Kubernetes' e2e images give the commands its tests run in them (`sh -c`, `dig`,
// `getent hosts`, `curl`, `nc -v -t -u -w`, `ss`, `hostname`, `seq`, ...), the tools agnhost's Dockerfile
// installs (bind-tools curl netcat-openbsd iproute2 bash), taken from the machine's Debian packages:
// busybox-static with every applet as a symlink, and dig, host, nslookup (bind9-dnsutils), getent (libc-bin),
// curl, wget, nc (netcat-openbsd), ip and ss (iproute2) and bash with the shared libraries they load.
var (
	toolboxBusybox = "/usr/bin/busybox"
	// toolboxDynamic maps each tool's path in the image to its path on the machine.
	toolboxDynamic = []struct{ image, machine string }{
		{"/usr/bin/dig", "/usr/bin/dig"}, {"/usr/bin/host", "/usr/bin/host"}, {"/usr/bin/nslookup", "/usr/bin/nslookup"},
		{"/usr/bin/getent", "/usr/bin/getent"}, {"/usr/bin/curl", "/usr/bin/curl"}, {"/usr/bin/nc", "/usr/bin/nc.openbsd"},
		{"/usr/bin/ip", "/usr/bin/ip"}, {"/usr/bin/ss", "/usr/bin/ss"}, {"/bin/bash", "/usr/bin/bash"},
		// GNU wget: busybox-static's wget crashes (SIGSEGV) on a refused connection.
		{"/usr/bin/wget", "/usr/bin/wget"},
	}
	// toolboxLibDirs are where Debian keeps amd64 shared libraries; the image holds them in the first, one
	// of the dynamic loader's built-in search paths, so no ld.so.cache is needed.
	toolboxLibDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"}
)

// toolboxEnv is the PATH the toolbox's images set.
var toolboxEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// toolboxFiles returns the toolbox's files, or an error naming the Debian package to install.
func toolboxFiles() ([]ociimage.File, error) {
	bb, err := ociimage.FromBinary(toolboxBusybox, "/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("the e2e images' shell is Debian's busybox-static (apt-get install busybox-static): %w", err)
	}
	files := append([]ociimage.File{bb}, distroless...)
	files = append(files,
		ociimage.File{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		ociimage.File{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")})
	list, err := exec.Command(toolboxBusybox, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("listing busybox's applets: %w", err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if "/"+applet == bb.Path {
			continue
		}
		files = append(files, ociimage.File{Path: "/" + applet, Mode: os.ModeSymlink, Data: []byte(relativeTo("/"+applet, "/bin/busybox"))})
	}
	// Debian's busybox-static runs its own applets from its shell before it searches PATH (nc would be its
	// own, without -v, -t or -u), so sh is bash, which finds the tools through PATH as the suite expects.
	files = append(files, ociimage.File{Path: "/bin/sh", Mode: os.ModeSymlink, Data: []byte("bash")})
	libs := map[string]bool{}
	for _, tool := range toolboxDynamic {
		f, err := ociimage.FromBinary(tool.machine, tool.image)
		if err != nil {
			return nil, fmt.Errorf("the e2e images carry %s (Debian's bind9-dnsutils, libc-bin, curl, wget, netcat-openbsd, iproute2, bash): %w", tool.machine, err)
		}
		files = append(files, f)
		if err := sharedLibraries(tool.machine, libs); err != nil {
			return nil, err
		}
	}
	for lib := range libs {
		f, err := ociimage.FromBinary(lib, libPathInImage(lib))
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// sharedLibraries adds to found the dynamic loader and every library bin needs, transitively, as paths on
// this machine.
func sharedLibraries(bin string, found map[string]bool) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("reading %s: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return fmt.Errorf("reading %s's interpreter: %w", bin, err)
			}
			found[strings.TrimRight(string(b), "\x00")] = true
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("reading %s's libraries: %w", bin, err)
	}
	for _, soname := range needed {
		lib, err := findLibrary(soname)
		if err != nil {
			return fmt.Errorf("%s needs %s: %w", bin, soname, err)
		}
		if found[lib] {
			continue
		}
		found[lib] = true
		if err := sharedLibraries(lib, found); err != nil {
			return err
		}
	}
	return nil
}

func findLibrary(soname string) (string, error) {
	for _, dir := range toolboxLibDirs {
		p := filepath.Join(dir, soname)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %v", toolboxLibDirs)
}

// libPathInImage keeps the dynamic loader where binaries name it and puts every library in the first
// library directory under its soname.
func libPathInImage(lib string) string {
	if strings.HasPrefix(path.Base(lib), "ld-linux") {
		return lib
	}
	return path.Join(toolboxLibDirs[0], path.Base(lib))
}

// relativeTo is the symlink target at link that points at target.
func relativeTo(link, target string) string {
	rel, err := filepath.Rel(path.Dir(link), target)
	if err != nil {
		return target
	}
	return rel
}
