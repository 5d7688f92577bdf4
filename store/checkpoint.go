package store

import (
	"database/sql"
	"sync"
	"sync/atomic"
)

// A WAL checkpoint copies the log into the main file and, under
// synchronous=NORMAL, fsyncs both (https://www.sqlite.org/wal.html#ckpt).
// SQLite runs it inside the commit that takes the log past
// wal_autocheckpoint pages (1000 by default): that commit, an admission
// among them, waits for two fsyncs. corepin checkpoints from a connection
// of its own instead, in the background, every checkpointEvery commits,
// and raises the commit's own threshold to autoCheckpointPages, so that a
// commit checkpoints only when the background falls that far behind. A
// checkpoint moves committed pages and never decides what is committed:
// what a killed process leaves is the same either way.
const (
	checkpointEvery     = 32
	autoCheckpointPages = 10000
)

// checkpointer runs PRAGMA wal_checkpoint(PASSIVE) on its own connection
// when kicked. PASSIVE waits for no reader or writer: a commit running
// meanwhile goes on appending to the log.
type checkpointer struct {
	db      *sql.DB
	commits atomic.Int64
	kick    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	// runs counts the checkpoints made (tests wait on it).
	runs     atomic.Int64
	stopOnce sync.Once
}

// startCheckpointer opens a connection to dsn (made on first use) and
// starts the checkpointer's goroutine.
func startCheckpointer(dsn string) (*checkpointer, error) {
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	sdb.SetMaxOpenConns(1)
	c := &checkpointer{db: sdb, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

// committed counts one commit and kicks the goroutine every
// checkpointEvery commits, without waiting for it.
func (c *checkpointer) committed() {
	if c.commits.Add(1)%checkpointEvery == 0 {
		c.now()
	}
}

// now asks for a checkpoint without waiting for it.
func (c *checkpointer) now() {
	select {
	case c.kick <- struct{}{}:
	default: // one is asked for already
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
			// A failed checkpoint (the disk full, say) leaves the log as
			// it was; the next kick, or a commit past
			// autoCheckpointPages, tries again.
			var busy, log, moved int
			if err := c.db.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &moved); err == nil {
				c.runs.Add(1)
			}
		}
	}
}

// stop ends the goroutine, waiting for a checkpoint under way, and closes
// its connection, so that the database's own connection is the last to
// close (SQLite then checkpoints and removes the log).
func (c *checkpointer) stop() {
	c.stopOnce.Do(func() {
		close(c.quit)
		<-c.done
		c.db.Close()
	})
}
