package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrConflict means an update named a generation that is no longer the
// current one: someone else changed the assignment in between.
var ErrConflict = errors.New("generation conflict")

// Assignment is the CPU set the agent gave one workload. Generation starts
// at 1 and grows by one on every SaveAssignment.
type Assignment struct {
	Name       string          `json:"name"`
	Cpuset     string          `json:"cpuset"` // Linux list format
	QoS        string          `json:"qos"`
	Request    json.RawMessage `json:"request,omitempty"` // the request as admitted, one JSON document
	CreatedAt  time.Time       `json:"created_at"`
	Generation int64           `json:"generation"`
}

// Admit adds an assignment named name unless one exists (ErrExists). In one
// BEGIN IMMEDIATE transaction it reads every current assignment, asks decide
// for the new one and inserts it, so no other writer, in this process or
// another, can admit in between: decide sees exactly what is assigned.
// An error from decide is returned unwrapped and nothing is written.
// decide must not call db: the transaction holds its one connection.
// The stored assignment gets name, generation 1 and, if zero, CreatedAt now.
func (db *DB) Admit(name string, decide func(current []Assignment) (Assignment, error)) (Assignment, error) {
	if name == "" {
		return Assignment{}, fmt.Errorf("admitting a workload: empty name")
	}
	var out Assignment
	err := db.tx(func(tx *sql.Tx) error {
		cur, err := assignments(tx)
		if err != nil {
			return err
		}
		for _, a := range cur {
			if a.Name == name {
				return fmt.Errorf("admitting %q: %w", name, ErrExists)
			}
		}
		a, err := decide(cur)
		if err != nil {
			return err
		}
		a.Name, a.Generation = name, 1
		if a.CreatedAt.IsZero() {
			a.CreatedAt = time.Now()
		}
		req, err := jsonArg("request", a.Request)
		if err != nil {
			return fmt.Errorf("admitting %q: %w", name, err)
		}
		if _, err := tx.Exec(`INSERT INTO assignments (name, cpuset, qos, request, created_at, generation)
			VALUES (?, ?, ?, ?, ?, 1)`, a.Name, a.Cpuset, a.QoS, req, timeArg(a.CreatedAt)); err != nil {
			return fmt.Errorf("admitting %q: %w", name, constraintErr(err))
		}
		out = a
		return nil
	})
	return out, err
}

// SaveAssignment inserts a or replaces the assignment of the same name and
// returns its new generation. If a.Generation is not 0 it must equal the
// stored one (ErrConflict otherwise, ErrNotFound if there is none): a
// compare-and-swap for updates. CreatedAt is kept from the stored row on
// update and defaults to now on insert.
func (db *DB) SaveAssignment(a Assignment) (int64, error) {
	if a.Name == "" {
		return 0, fmt.Errorf("saving an assignment: empty name")
	}
	req, err := jsonArg("request", a.Request)
	if err != nil {
		return 0, fmt.Errorf("saving assignment %q: %w", a.Name, err)
	}
	var gen int64
	err = db.tx(func(tx *sql.Tx) error {
		var cur int64
		err := tx.QueryRow(`SELECT generation FROM assignments WHERE name = ?`, a.Name).Scan(&cur)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if a.Generation != 0 {
				return fmt.Errorf("saving assignment %q at generation %d: %w", a.Name, a.Generation, ErrNotFound)
			}
			if a.CreatedAt.IsZero() {
				a.CreatedAt = time.Now()
			}
			gen = 1
			_, err = tx.Exec(`INSERT INTO assignments (name, cpuset, qos, request, created_at, generation)
				VALUES (?, ?, ?, ?, ?, 1)`, a.Name, a.Cpuset, a.QoS, req, timeArg(a.CreatedAt))
		case err != nil:
			return fmt.Errorf("saving assignment %q: %w", a.Name, err)
		default:
			if a.Generation != 0 && a.Generation != cur {
				return fmt.Errorf("saving assignment %q at generation %d, stored is %d: %w", a.Name, a.Generation, cur, ErrConflict)
			}
			gen = cur + 1
			_, err = tx.Exec(`UPDATE assignments SET cpuset = ?, qos = ?, request = ?, generation = ?
				WHERE name = ?`, a.Cpuset, a.QoS, req, gen, a.Name)
		}
		if err != nil {
			return fmt.Errorf("saving assignment %q: %w", a.Name, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return gen, nil
}

// DeleteAssignment removes the assignment named name; ErrNotFound if there
// is none.
func (db *DB) DeleteAssignment(name string) error {
	return db.tx(func(tx *sql.Tx) error {
		res, err := tx.Exec(`DELETE FROM assignments WHERE name = ?`, name)
		if err != nil {
			return fmt.Errorf("deleting assignment %q: %w", name, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("deleting assignment %q: %w", name, err)
		}
		if n == 0 {
			return fmt.Errorf("deleting assignment %q: %w", name, ErrNotFound)
		}
		return nil
	})
}

// ReleaseAssignments deletes the assignments pick names, in one BEGIN
// IMMEDIATE transaction that also reads what pick sees, so no other
// writer can change an assignment between pick's decision and its
// deletion. It returns the deleted assignments as they were. An error
// from pick is returned unwrapped and nothing is deleted; a name that
// is not among current is ErrNotFound and nothing is deleted. pick must
// not call db: the transaction holds its one connection.
func (db *DB) ReleaseAssignments(pick func(current []Assignment) (names []string, err error)) ([]Assignment, error) {
	var out []Assignment
	err := db.tx(func(tx *sql.Tx) error {
		cur, err := assignments(tx)
		if err != nil {
			return err
		}
		names, err := pick(cur)
		if err != nil {
			return err
		}
		byName := make(map[string]Assignment, len(cur))
		for _, a := range cur {
			byName[a.Name] = a
		}
		done := make(map[string]bool, len(names))
		for _, name := range names {
			if done[name] {
				continue // a name given twice is deleted once
			}
			done[name] = true
			a, ok := byName[name]
			if !ok {
				return fmt.Errorf("releasing assignment %q: %w", name, ErrNotFound)
			}
			if _, err := tx.Exec(`DELETE FROM assignments WHERE name = ?`, name); err != nil {
				return fmt.Errorf("releasing assignment %q: %w", name, err)
			}
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Assignments lists every assignment by name. It is one SELECT, hence one
// consistent snapshot (a read transaction of its own), and takes no write
// lock.
func (db *DB) Assignments() ([]Assignment, error) { return assignments(db.db) }

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	Query(query string, args ...any) (*sql.Rows, error)
}

func assignments(q querier) ([]Assignment, error) {
	rows, err := q.Query(`SELECT name, cpuset, qos, request, created_at, generation
		FROM assignments ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing assignments: %w", err)
	}
	defer rows.Close()
	var out []Assignment
	for rows.Next() {
		var a Assignment
		var req, created sql.NullString
		if err := rows.Scan(&a.Name, &a.Cpuset, &a.QoS, &req, &created, &a.Generation); err != nil {
			return nil, fmt.Errorf("listing assignments: %w", err)
		}
		if a.CreatedAt, err = parseTime(created); err != nil {
			return nil, fmt.Errorf("reading assignment %q: %w", a.Name, err)
		}
		a.Request = rawJSON(req)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing assignments: %w", err)
	}
	return out, nil
}
