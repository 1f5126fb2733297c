-- The lease table, as lease-sql's Statements::create_table creates it.
-- Rename `leases` as you like; give the store the same table name.
CREATE TABLE IF NOT EXISTS `leases` (
    name       VARBINARY(255) NOT NULL PRIMARY KEY,
    holder     VARBINARY(1024),
    fence      BIGINT NOT NULL,
    taken_at   DATETIME(6) NOT NULL,
    expires_at DATETIME(6) NOT NULL
) ENGINE = InnoDB;
