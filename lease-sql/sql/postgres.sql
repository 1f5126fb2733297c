-- The lease table, as lease-sql's Statements::create_table creates it.
-- Rename `leases` as you like; give the store the same table name.
CREATE TABLE IF NOT EXISTS "leases" (
    name       text COLLATE "C" NOT NULL PRIMARY KEY,
    holder     text,
    fence      bigint NOT NULL,
    taken_at   timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
