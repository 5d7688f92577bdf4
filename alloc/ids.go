package alloc

import "hash/maphash"

// idIndex finds a State's records by id: an open-addressing hash table
// with linear probing, each slot 0 (empty) or a record's index plus one.
// It replaces a map[string]int32 that a fresh State per decision (the
// extender, the scheduler plugin) made and filled for every assignment of
// its node: one small block of slots, and no second copy of the ids (they
// stay in the records). A table of at most smallTable slots, which holds
// at most half as many ids, keeps its slots in bytes (small), a larger
// one in int32s (slots): the 128 slots of a fresh State's first records
// (recordsHint) take 128 bytes, not 512.
type idIndex struct {
	small []uint8 // the slots of a table of at most smallTable; nil otherwise
	slots []int32 // the slots of a larger table; nil otherwise
	n     int     // ids held
}

// smallTable is the most slots a table keeps in bytes: it holds at most
// 128 ids, so a slot's value (a record index plus one) is at most 128.
const smallTable = 256

// idSeed hashes every State's ids; their order never shows (lookups only).
var idSeed = maphash.MakeSeed()

func idHash(id string) uint64 { return maphash.String(idSeed, id) }

// size is the table's number of slots, a power of two (0 when empty).
func (x *idIndex) size() int {
	if x.small != nil {
		return len(x.small)
	}
	return len(x.slots)
}

// at returns slot h.
func (x *idIndex) at(h uint64) int32 {
	if x.small != nil {
		return int32(x.small[h])
	}
	return x.slots[h]
}

// put sets slot h to v.
func (x *idIndex) put(h uint64, v int32) {
	if x.small != nil {
		x.small[h] = uint8(v)
		return
	}
	x.slots[h] = v
}

// lookup returns the record index of id among recs.
func (x *idIndex) lookup(recs []record, id string) (int32, bool) {
	return x.lookupHash(recs, id, idHash(id))
}

// lookupHash is lookup for id of hash hash (idHash), which a caller that
// also inserts id computes once.
func (x *idIndex) lookupHash(recs []record, id string, hash uint64) (int32, bool) {
	if x.n == 0 {
		return 0, false
	}
	mask := uint64(x.size() - 1)
	for h := hash & mask; ; h = (h + 1) & mask {
		v := x.at(h)
		if v == 0 {
			return 0, false
		}
		if recs[v-1].id == id {
			return v - 1, true
		}
	}
}

// insert records that recs[i] holds an id of hash hash (idHash), which
// the index does not hold; room is the number of ids it makes room for
// when it first grows.
func (x *idIndex) insert(recs []record, hash uint64, i int32, room int) {
	if 2*(x.n+1) > x.size() {
		x.grow(recs, max(room, 2*(x.n+1)))
	}
	mask := uint64(x.size() - 1)
	h := hash & mask
	for x.at(h) != 0 {
		h = (h + 1) & mask
	}
	x.put(h, i+1)
	x.n++
}

// grow remakes the table with room for ids ids, from the records its slots
// name.
func (x *idIndex) grow(recs []record, ids int) {
	size := 8
	for size < 2*ids {
		size *= 2
	}
	old := *x
	x.small, x.slots = nil, nil
	if size <= smallTable {
		x.small = make([]uint8, size)
	} else {
		x.slots = make([]int32, size)
	}
	mask := uint64(size - 1)
	for j := range old.size() {
		v := old.at(uint64(j))
		if v == 0 {
			continue
		}
		h := idHash(recs[v-1].id) & mask
		for x.at(h) != 0 {
			h = (h + 1) & mask
		}
		x.put(h, v)
	}
}

// slot returns the slot holding record index i, whose id is id.
func (x *idIndex) slot(id string, i int32) uint64 {
	mask := uint64(x.size() - 1)
	h := idHash(id) & mask
	for x.at(h) != i+1 {
		h = (h + 1) & mask
	}
	return h
}

// remove forgets id, held by recs[i] (recs as the index knows them),
// moving back the entries after it that its slot kept from their place.
func (x *idIndex) remove(recs []record, id string, i int32) {
	mask := uint64(x.size() - 1)
	hole := x.slot(id, i)
	x.put(hole, 0)
	x.n--
	for j := (hole + 1) & mask; x.at(j) != 0; j = (j + 1) & mask {
		home := idHash(recs[x.at(j)-1].id) & mask
		// The entry at j stays where its home lies cyclically in (hole, j].
		if (hole < j && hole < home && home <= j) || (hole > j && (home > hole || home <= j)) {
			continue
		}
		x.put(hole, x.at(j))
		x.put(j, 0)
		hole = j
	}
}

// renumber records that the id held by record index from is now at to.
func (x *idIndex) renumber(id string, from, to int32) {
	x.put(x.slot(id, from), to+1)
}

// clone returns an independent copy.
func (x idIndex) clone() idIndex {
	if x.small != nil {
		x.small = append([]uint8(nil), x.small...)
	}
	if x.slots != nil {
		x.slots = append([]int32(nil), x.slots...)
	}
	return x
}
