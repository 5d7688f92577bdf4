// Package plan is the `corepin plan` document: a machine, what is already
// placed on it and a list of requests in, one result per request out. It
// decodes and checks the document (Decode), places the requests in order on
// an alloc.State, each seeing the ones before (Document.Place), and gives
// back the results in the JSON shape of ../shared/design.md. The CLI, the
// agent's API and the NRI plugin take the same requests through it; none of
// them re-implements a part of it.
//
// It changes nothing on any machine. Reading a topology is the caller's
// business (a Loader), so the package does no I/O of its own beyond the
// reader it is handed, which it reads at most MaxBytes of.
//
// Every error about the document as written matches ErrInvalid (errors.Is)
// and keeps the chain of its cause (alloc.ErrInvalid, a cpuset parse error,
// a topology error); a request the machine cannot take is not an error but a
// Result with its reason.
package plan
