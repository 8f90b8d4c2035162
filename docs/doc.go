// Package docs holds the project's documentation (the Markdown files beside this one) and the tests that keep
// it whole: every relative link of the README, docs/ and the other Markdown files resolves to a file and a
// heading inside the repository, no file cites a path outside it, and the README's first screen says what
// eniwire is and names the two commands.
package docs
