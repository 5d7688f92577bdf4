// Command statefile prints the assignments a corepin state file records,
// read only (store.OpenReadOnly: nothing written, a plugin may keep
// writing it meanwhile), as one JSON array: statefile FILE [ID]...; an
// assignment of one of the container IDs given (corepin nri names it
// after the container, nodecore.ContainerName) carries that ID as
// "container". make e2e-deploy builds it to compare what the in-pod
// plugin recorded on the node's hostPath with what the kernel shows.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/store"
)

type entry struct {
	store.Assignment
	Container string `json:"container,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: statefile FILE [CONTAINER-ID]...")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "statefile:", err)
		os.Exit(1)
	}
}

func run(path string, ids []string) error {
	db, err := store.OpenReadOnly(path)
	if err != nil {
		return err
	}
	defer db.Close()
	as, err := db.Assignments()
	if err != nil {
		return err
	}
	byName := map[string]string{}
	for _, id := range ids {
		byName[nodecore.ContainerName(id)] = id
	}
	out := []entry{}
	for _, a := range as {
		out = append(out, entry{Assignment: a, Container: byName[a.Name]})
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
