// Package cniinstall puts the CNI plugin binary and its network configuration on the host, the way kubelet and
// the container runtime expect them: the binary in the CNI bin dir under the name the conflist's "type" names,
// the conflist in the CNI conf dir. Every file is replaced atomically (a temporary file in the same directory,
// fsync'd, then renamed over the old one), so a runtime that execs the plugin or reads the configuration while
// an install or upgrade runs sees either the old file or the new one, never a partial one.
//
// The agent calls Install only once it is ready to serve the plugin: the runtime reports the node's network
// ready as soon as a valid conflist appears, so writing it earlier would let kubelet schedule pods onto an
// agent that cannot answer them.
package cniinstall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

// Defaults used when Options leave them empty.
const (
	DefaultPluginName   = "eniwire"
	DefaultConflistName = "10-eniwire.conflist"
)

// File modes of the installed files: the plugin is executed by the runtime, the conflist is read by it.
const (
	PluginMode   fs.FileMode = 0o755
	ConflistMode fs.FileMode = 0o644
)

// Errors a caller may branch on; every error Install and Uninstall return wraps one of them or an I/O error.
var (
	// ErrInvalidOptions: Options are incomplete or malformed (missing paths, a conflist that is not valid).
	ErrInvalidOptions = errors.New("invalid install options")
	// ErrPluginSourceMissing: the plugin binary to install is not a regular file at PluginSrc.
	ErrPluginSourceMissing = errors.New("plugin binary to install is missing")
	// ErrDirMissing: a host directory does not exist or is not a directory (usually a missing hostPath mount).
	ErrDirMissing = errors.New("host directory is missing")
	// ErrDirNotWritable: a host directory exists but refuses writes (read-only mount or permissions).
	ErrDirNotWritable = errors.New("host directory is not writable")
)

// Options say what to install where. PluginSrc, HostBinDir, HostConfDir and Conflist are required.
type Options struct {
	// PluginSrc is the plugin binary inside the agent's image (e.g. /usr/local/bin/eniwire).
	PluginSrc string
	// HostBinDir is the host's CNI bin dir as mounted in the agent's container (e.g. /host/opt/cni/bin).
	HostBinDir string
	// HostConfDir is the host's CNI conf dir as mounted in the agent's container (e.g. /host/etc/cni/net.d).
	HostConfDir string
	// Conflist is the network configuration list to write; it must parse as a CNI conflist.
	Conflist []byte
	// ConflistName is the file name in HostConfDir (default 10-eniwire.conflist). It must end in .conflist:
	// runtimes load only .conf, .conflist and .json files, and a plain .conf cannot hold a chain.
	ConflistName string
	// PluginName is the file name in HostBinDir (default eniwire); it must equal the conflist's "type".
	PluginName string
	// Logger receives one line per file changed (default: slog.Default()).
	Logger *slog.Logger
}

// tempPrefix starts every temporary file's name. It begins with a dot and has no .conf/.conflist/.json
// suffix, so neither a runtime scanning the conf dir nor a conflist naming a plugin type ever picks one up.
const tempPrefix = ".eniwire-install-"

func (o *Options) normalize() error {
	if o.PluginName == "" {
		o.PluginName = DefaultPluginName
	}
	if o.ConflistName == "" {
		o.ConflistName = DefaultConflistName
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.HostBinDir == "":
		return fmt.Errorf("%w: HostBinDir is empty", ErrInvalidOptions)
	case o.HostConfDir == "":
		return fmt.Errorf("%w: HostConfDir is empty", ErrInvalidOptions)
	case !plainName(o.PluginName):
		return fmt.Errorf("%w: PluginName %q is not a plain file name", ErrInvalidOptions, o.PluginName)
	case !plainName(o.ConflistName) || !strings.HasSuffix(o.ConflistName, ".conflist"):
		return fmt.Errorf("%w: ConflistName %q is not a plain file name ending in .conflist", ErrInvalidOptions, o.ConflistName)
	}
	return nil
}

func plainName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsRune(s, '/') && !strings.HasPrefix(s, tempPrefix)
}

// Install copies the plugin binary to HostBinDir/PluginName and then writes the conflist to
// HostConfDir/ConflistName, each atomically; the binary goes first so that a runtime that sees the new
// configuration always finds the plugin it names. A file whose content and mode are already right is left
// untouched (a restart of the agent does not make the runtime reload its configuration), so Install is
// idempotent; an upgrade replaces both files. Temporary files left by an install that crashed are removed.
func Install(ctx context.Context, o Options) error {
	if err := o.normalize(); err != nil {
		return err
	}
	if o.PluginSrc == "" {
		return fmt.Errorf("%w: PluginSrc is empty", ErrInvalidOptions)
	}
	if err := validateConflist(o.Conflist, o.PluginName); err != nil {
		return err
	}
	src, err := os.Open(o.PluginSrc)
	if err != nil {
		return fmt.Errorf("opening the plugin binary %s: %w: %w", o.PluginSrc, ErrPluginSourceMissing, err)
	}
	defer src.Close()
	if st, err := src.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("opening the plugin binary %s: %w: not a regular file", o.PluginSrc, ErrPluginSourceMissing)
	}
	for _, dir := range []string{o.HostBinDir, o.HostConfDir} {
		if err := checkDir(dir); err != nil {
			return err
		}
		removeStale(dir, o.Logger)
	}

	binPath := filepath.Join(o.HostBinDir, o.PluginName)
	changed, err := replaceFile(ctx, binPath, src, PluginMode)
	if err != nil {
		return fmt.Errorf("installing the CNI plugin to %s: %w", binPath, err)
	}
	if changed {
		o.Logger.Info("installed the CNI plugin", "path", binPath)
	}
	confPath := filepath.Join(o.HostConfDir, o.ConflistName)
	changed, err = replaceFile(ctx, confPath, bytes.NewReader(o.Conflist), ConflistMode)
	if err != nil {
		return fmt.Errorf("writing the CNI conflist to %s: %w", confPath, err)
	}
	if changed {
		o.Logger.Info("wrote the CNI conflist", "path", confPath)
	}
	return nil
}

// Uninstall removes the conflist and then the plugin binary; files already gone are not an error. The
// conflist goes first so the runtime stops reporting the network ready before the plugin it names vanishes.
// Call it only when eniwire leaves the node for good: pods still running need the plugin for their DEL.
func Uninstall(ctx context.Context, o Options) error {
	if err := o.normalize(); err != nil {
		return err
	}
	for _, p := range []string{filepath.Join(o.HostConfDir, o.ConflistName), filepath.Join(o.HostBinDir, o.PluginName)} {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("uninstalling %s: %w", p, err)
		}
		// Lstat first: a read-only file system reports EROFS even for a name that does not exist.
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		err := os.Remove(p)
		switch {
		case err == nil:
			if err := syncDir(filepath.Dir(p)); err != nil {
				return fmt.Errorf("uninstalling %s: %w", p, err)
			}
			o.Logger.Info("removed", "path", p)
		case errors.Is(err, fs.ErrNotExist):
		default:
			return fmt.Errorf("uninstalling %s: %w", p, classify(filepath.Dir(p), err))
		}
	}
	return nil
}

// validateConflist rejects a configuration the runtime would refuse or that would not call our plugin: the
// runtime would then keep the node's network not ready with a message far from its cause.
func validateConflist(b []byte, pluginName string) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: Conflist is empty", ErrInvalidOptions)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		return fmt.Errorf("%w: parsing the conflist: %w", ErrInvalidOptions, err)
	}
	for _, p := range list.Plugins {
		if p.Network != nil && p.Network.Type == pluginName {
			return nil
		}
	}
	return fmt.Errorf("%w: the conflist %q has no plugin of type %q", ErrInvalidOptions, list.Name, pluginName)
}

// checkDir says which of the two usual mistakes happened: the hostPath is not mounted, or it is read-only.
func checkDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("checking %s: %w", dir, classify(dir, err))
	}
	if !st.IsDir() {
		return fmt.Errorf("checking %s: %w: it is not a directory", dir, ErrDirMissing)
	}
	return nil
}

// classify wraps an OS error with the sentinel a caller branches on, keeping the OS error for the message.
func classify(dir string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNotDir):
		return fmt.Errorf("%w (is %s mounted from the host?): %w", ErrDirMissing, dir, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, errReadOnly):
		return fmt.Errorf("%w (is %s mounted read-only?): %w", ErrDirNotWritable, dir, err)
	}
	return err
}

// removeStale deletes temporary files a crashed install left; failing to is harmless, they are never read.
func removeStale(dir string, log *slog.Logger) {
	matches, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	for _, m := range matches {
		if os.Remove(m) == nil {
			log.Info("removed a temporary file left by an interrupted install", "path", m)
		}
	}
}

// sameContent reports whether path already holds exactly want's bytes with mode.
func sameContent(path string, want io.ReadSeeker, mode fs.FileMode) bool {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != mode {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := want.Seek(0, io.SeekStart); err != nil {
		return false
	}
	defer want.Seek(0, io.SeekStart) //nolint:errcheck // the copy seeks again and reports its own error
	return equalReaders(f, want)
}

func equalReaders(a, b io.Reader) bool {
	const chunk = 64 << 10
	ba, bb := make([]byte, chunk), make([]byte, chunk)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		aDone := ea == io.EOF || ea == io.ErrUnexpectedEOF
		bDone := eb == io.EOF || eb == io.ErrUnexpectedEOF
		if aDone || bDone {
			return aDone && bDone
		}
		if ea != nil || eb != nil {
			return false
		}
	}
}
