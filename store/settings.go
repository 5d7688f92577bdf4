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
