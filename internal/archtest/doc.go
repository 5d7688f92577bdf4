// Package archtest holds no code: its test enforces the one-way import
// rules of the house (../shared/design.md, "The house: data flows one way")
// on every package of the module, so a layering mistake fails `make test`
// instead of waiting for a reviewer.
package archtest
