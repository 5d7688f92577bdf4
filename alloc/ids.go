package alloc

import "hash/maphash"

// idIndex finds a State's records by id: an open-addressing hash table
// with linear probing, each slot 0 (empty) or a record's index plus one.
// It replaces a map[string]int32 that a fresh State per decision (the
// extender, the scheduler plugin) made and filled for every assignment of
// its node: one small block of int32 slots, and no second copy of the ids
// (they stay in the records).
type idIndex struct {
	slots []int32 // a power of two long, at most half full; nil when empty
	n     int     // ids held
}

// idSeed hashes every State's ids; their order never shows (lookups only).
var idSeed = maphash.MakeSeed()

func idHash(id string) uint64 { return maphash.String(idSeed, id) }

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
	mask := uint64(len(x.slots) - 1)
	for h := hash & mask; ; h = (h + 1) & mask {
		v := x.slots[h]
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
	if 2*(x.n+1) > len(x.slots) {
		x.grow(recs, max(room, 2*(x.n+1)))
	}
	mask := uint64(len(x.slots) - 1)
	h := hash & mask
	for x.slots[h] != 0 {
		h = (h + 1) & mask
	}
	x.slots[h] = i + 1
	x.n++
}

// grow remakes the table with room for ids ids, from the records its slots
// name.
func (x *idIndex) grow(recs []record, ids int) {
	size := 8
	for size < 2*ids {
		size *= 2
	}
	old := x.slots
	x.slots = make([]int32, size)
	mask := uint64(size - 1)
	for _, v := range old {
		if v == 0 {
			continue
		}
		h := idHash(recs[v-1].id) & mask
		for x.slots[h] != 0 {
			h = (h + 1) & mask
		}
		x.slots[h] = v
	}
}

// slot returns the slot holding record index i, whose id is id.
func (x *idIndex) slot(id string, i int32) uint64 {
	mask := uint64(len(x.slots) - 1)
	h := idHash(id) & mask
	for x.slots[h] != i+1 {
		h = (h + 1) & mask
	}
	return h
}

// remove forgets id, held by recs[i] (recs as the index knows them),
// moving back the entries after it that its slot kept from their place.
func (x *idIndex) remove(recs []record, id string, i int32) {
	mask := uint64(len(x.slots) - 1)
	hole := x.slot(id, i)
	x.slots[hole] = 0
	x.n--
	for j := (hole + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		home := idHash(recs[x.slots[j]-1].id) & mask
		// The entry at j stays where its home lies cyclically in (hole, j].
		if (hole < j && hole < home && home <= j) || (hole > j && (home > hole || home <= j)) {
			continue
		}
		x.slots[hole], x.slots[j] = x.slots[j], 0
		hole = j
	}
}

// renumber records that the id held by record index from is now at to.
func (x *idIndex) renumber(id string, from, to int32) {
	x.slots[x.slot(id, from)] = to + 1
}

// clone returns an independent copy.
func (x idIndex) clone() idIndex {
	if x.slots != nil {
		x.slots = append([]int32(nil), x.slots...)
	}
	return x
}
