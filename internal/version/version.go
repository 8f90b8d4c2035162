// Package version carries the build's version, set at link time with -ldflags -X.
package version

// Version is the release this binary was built from; "dev" for a plain go build.
var Version = "dev"
