package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Bounds of a setting: its key and its JSON value.
const (
	MaxSettingKey   = 64
	MaxSettingValue = 64 << 10
)

// Setting is one row of the settings table: a JSON document under a key,
// and when it was last written.
type Setting struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// SaveSetting stores value (one JSON document of at most
// MaxSettingValue bytes) under key, replacing what was there: the last
// writer wins.
func (db *DB) SaveSetting(key string, value json.RawMessage) error {
	if key == "" || len(key) > MaxSettingKey {
		return fmt.Errorf("saving setting %.64q: key is empty or longer than %d bytes", key, MaxSettingKey)
	}
	if len(value) == 0 || len(value) > MaxSettingValue {
		return fmt.Errorf("saving setting %q: value of %d bytes: want 1 to %d", key, len(value), MaxSettingValue)
	}
	v, err := jsonArg("value", value)
	if err != nil {
		return fmt.Errorf("saving setting %q: %w", key, err)
	}
	return db.tx(func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			key, v, timeArg(time.Now())); err != nil {
			return fmt.Errorf("saving setting %q: %w", key, err)
		}
		return nil
	})
}

// LoadSetting returns the setting under key; ErrNotFound if there is none.
func (db *DB) LoadSetting(key string) (Setting, error) {
	var s Setting
	var value string
	var updated sql.NullString
	err := db.db.QueryRow(`SELECT key, value, updated_at FROM settings WHERE key = ?`, key).Scan(&s.Key, &value, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return Setting{}, fmt.Errorf("reading setting %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return Setting{}, fmt.Errorf("reading setting %q: %w", key, err)
	}
	if s.UpdatedAt, err = parseTime(updated); err != nil {
		return Setting{}, fmt.Errorf("reading setting %q: %w", key, err)
	}
	s.Value = json.RawMessage(value)
	return s, nil
}

// UpdateSetting reads the setting under key (nil when there is none),
// asks update for its new value and stores it, all in one BEGIN IMMEDIATE
// transaction: no other writer, in this process or another, changes the
// file in between, so update may also act outside the file (write a
// kernel setting) knowing no other process sharing the file does so at
// the same time. An empty value deletes the setting; a value equal to the
// old one writes nothing. An error from update is returned unwrapped and
// nothing is written. update must not call db: the transaction holds its
// one connection.
func (db *DB) UpdateSetting(key string, update func(old json.RawMessage) (json.RawMessage, error)) error {
	if key == "" || len(key) > MaxSettingKey {
		return fmt.Errorf("updating setting %.64q: key is empty or longer than %d bytes", key, MaxSettingKey)
	}
	return db.tx(func(tx *sql.Tx) error {
		var old json.RawMessage
		var value string
		err := tx.QueryRow(`SELECT value FROM settings WHERE key = ?`, key).Scan(&value)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("reading setting %q: %w", key, err)
		default:
			old = json.RawMessage(value)
		}
		val, err := update(old)
		if err != nil {
			return err
		}
		switch {
		case len(val) == 0 && old == nil, len(val) > 0 && string(val) == string(old):
			return nil
		case len(val) == 0:
			if _, err := tx.Exec(`DELETE FROM settings WHERE key = ?`, key); err != nil {
				return fmt.Errorf("deleting setting %q: %w", key, err)
			}
			return nil
		}
		if len(val) > MaxSettingValue {
			return fmt.Errorf("saving setting %q: value of %d bytes: want 1 to %d", key, len(val), MaxSettingValue)
		}
		v, err := jsonArg("value", val)
		if err != nil {
			return fmt.Errorf("saving setting %q: %w", key, err)
		}
		if _, err := tx.Exec(`INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			key, v, timeArg(time.Now())); err != nil {
			return fmt.Errorf("saving setting %q: %w", key, err)
		}
		return nil
	})
}
