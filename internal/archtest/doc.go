// Package archtest holds no code: its tests enforce the one-way import
// rules of the house (../shared/design.md, "The house: data flows one way")
// on every package of the main module, the rules between the repository's
// modules (scheduler/, tools/, test/*: no module imports another's
// internal packages, the scheduler module reaches the main module through
// kube/nodestate), that no scheduler door keeps a judge of its own and
// that the NRI plugin writes no cgroup but through package enforce, so a
// layering mistake fails `make test` instead of waiting for a reviewer.
package archtest
