package store

import (
	"database/sql"
	"fmt"
)

// Replace rewrites the assignment named name (ErrNotFound if there is
// none). In one BEGIN IMMEDIATE transaction it reads every current
// assignment, asks decide for the new form of old, the stored one, and
// updates it, so no other writer, in this process or another, can admit
// in between: decide sees exactly what is assigned, as in Admit. The
// stored assignment keeps name and CreatedAt and gets the next
// generation. An error from decide is returned unwrapped and nothing is
// written. decide must not call db: the transaction holds its one
// connection.
func (db *DB) Replace(name string, decide func(current []Assignment, old Assignment) (Assignment, error)) (Assignment, error) {
	var out Assignment
	err := db.tx(func(tx *sql.Tx) error {
		cur, err := assignments(tx)
		if err != nil {
			return err
		}
		i := -1
		for j := range cur {
			if cur[j].Name == name {
				i = j
			}
		}
		if i < 0 {
			return fmt.Errorf("replacing assignment %q: %w", name, ErrNotFound)
		}
		old := cur[i]
		a, err := decide(cur, old)
		if err != nil {
			return err
		}
		a.Name, a.CreatedAt, a.Generation = name, old.CreatedAt, old.Generation+1
		req, err := jsonArg("request", a.Request)
		if err != nil {
			return fmt.Errorf("replacing assignment %q: %w", name, err)
		}
		if _, err := tx.Exec(`UPDATE assignments SET cpuset = ?, qos = ?, request = ?, generation = ? WHERE name = ?`,
			a.Cpuset, a.QoS, req, a.Generation, name); err != nil {
			return fmt.Errorf("replacing assignment %q: %w", name, err)
		}
		out = a
		return nil
	})
	return out, err
}
