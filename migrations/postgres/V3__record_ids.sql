-- Each event's own id (not chained): a batch whose commit reached the
-- server but whose answer was lost is tried again by its node, and the
-- rows already there are found by id instead of being written twice.
ALTER TABLE events ADD COLUMN rid TEXT;
CREATE UNIQUE INDEX events_rid ON events (rid) WHERE rid IS NOT NULL;
