package cniinstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

var (
	errNotDir   = syscall.ENOTDIR
	errReadOnly = syscall.EROFS
)

// replaceFile makes path hold src's bytes with mode, atomically: the bytes go to a temporary file in the same
// directory (rename is atomic only within one file system), which is fsync'd, given its mode and renamed over
// path; then the directory is fsync'd so the rename survives a power cut. Renaming also works while the old
// plugin binary is being executed (writing into it in place would fail with ETXTBSY). It reports whether it
// changed anything: a file that already matches is left as it is.
func replaceFile(ctx context.Context, path string, src io.ReadSeeker, mode fs.FileMode) (bool, error) {
	if sameContent(path, src, mode) {
		return false, nil
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return false, fmt.Errorf("rewinding the source: %w", err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, tempPrefix+filepath.Base(path)+".*")
	if err != nil {
		return false, fmt.Errorf("creating a temporary file: %w", classify(dir, err))
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, ctxReader{ctx, src}); err != nil {
		return false, fmt.Errorf("writing %s: %w", tmp.Name(), classify(dir, err))
	}
	// Chmod on the descriptor: CreateTemp made it 0600 and the umask must not decide the final mode.
	if err := tmp.Chmod(mode); err != nil {
		return false, fmt.Errorf("setting the mode of %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return false, fmt.Errorf("syncing %s: %w", tmp.Name(), classify(dir, err))
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("closing %s: %w", tmp.Name(), classify(dir, err))
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("renaming %s over it: %w", tmp.Name(), classify(dir, err))
	}
	done = true
	if err := syncDir(dir); err != nil {
		return true, err
	}
	return true, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s to sync it: %w", dir, err)
	}
	defer d.Close()
	// Some file systems (and some overlay setups) refuse fsync on a directory; the rename is done either way.
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// ctxReader stops a copy when the context ends, so a cancelled agent start does not finish a large copy.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
