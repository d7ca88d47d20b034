-- install
CREATE OR REPLACE FUNCTION `golden_adopt_team`.`golden_relay_adopt_headers`(h LONGTEXT) RETURNS LONGTEXT CHARSET utf8mb4 DETERMINISTIC NO SQL
BEGIN
    DECLARE v_names, v_name, v_value LONGTEXT;
    DECLARE v_result LONGTEXT DEFAULT '{}';
    DECLARE v_msg VARCHAR(512);
    DECLARE i, n INT DEFAULT 0;
    IF h IS NULL OR (JSON_VALID(h) AND JSON_TYPE(h) = 'NULL') THEN
        RETURN v_result;
    END IF;
    IF NOT JSON_VALID(h) OR JSON_TYPE(h) <> 'OBJECT' THEN
        SET v_msg = CONCAT('outboxkit adopt: ', 'column headers of `golden_adopt_team`.`outbox_events`', ' must hold a JSON object of headers, not ',
            IF(JSON_VALID(h), CONCAT('a JSON ', LOWER(JSON_TYPE(h))), 'invalid JSON'));
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, COLUMN_NAME = 'headers';
    END IF;
    SET v_names = JSON_KEYS(h), n = JSON_LENGTH(v_names);
    WHILE i < n DO
        SET v_name = JSON_UNQUOTE(JSON_EXTRACT(v_names, CONCAT('$[', i, ']'))), i = i + 1;
        SET v_value = JSON_EXTRACT(h, CONCAT('$.', JSON_QUOTE(v_name)));
        IF NOT (CAST(v_name AS BINARY) IN ('aggregate_id', 'aggregate_type', 'created_at', 'event_id', 'event_type', 'handler_poisoned', 'outbox_topic', 'reason_poisoned', 'subscriber_poisoned', 'tenant_id', 'topic_poisoned') OR LEFT(CAST(v_name AS BINARY), 11) = '_watermill_' OR LEFT(CAST(v_name AS BINARY), 7) = 'outbox_' OR JSON_TYPE(v_value) = 'NULL') THEN
            IF JSON_TYPE(v_value) IN ('OBJECT', 'ARRAY') THEN
                SET v_msg = CONCAT('outboxkit adopt: header ', JSON_QUOTE(v_name), ' in ', 'column headers of `golden_adopt_team`.`outbox_events`', ' is a JSON ', LOWER(JSON_TYPE(v_value)),
                    '; header values must be strings, numbers or booleans');
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, COLUMN_NAME = 'headers';
            END IF;
            SET v_result = JSON_SET(v_result, CONCAT('$.', JSON_QUOTE(v_name)), JSON_UNQUOTE(v_value));
        END IF;
    END WHILE;
    RETURN v_result;
END;
LOCK TABLES `golden_adopt_team`.`outbox_events` WRITE, `golden_adopt_team`.`outbox_events` AS t READ, `golden_adopt_team`.golden_relay WRITE, `golden_adopt_team`.golden_relay AS r READ;
DROP TRIGGER IF EXISTS `golden_adopt_team`.`golden_relay_adopt_forward`;
CREATE TRIGGER `golden_adopt_team`.`golden_relay_adopt_forward` AFTER INSERT ON `golden_adopt_team`.`outbox_events` FOR EACH ROW
IF NEW.`status` <=> 'PENDING' THEN
    INSERT INTO `golden_adopt_team`.golden_relay (event_id, topic, aggregate_id, event_type, aggregate_type, payload, headers, created_at, key_hash, partition_no)
    VALUES (CONVERT(NEW.`id` USING utf8mb4), CONCAT(LOWER(CONVERT(NEW.`aggregate_type` USING utf8mb4)), '.events'), CONVERT(NEW.`aggregate_id` USING utf8mb4), CONVERT(NEW.`event_type` USING utf8mb4), CONVERT(NEW.`aggregate_type` USING utf8mb4), CONVERT(NEW.`payload` USING utf8mb4), `golden_adopt_team`.golden_relay_adopt_headers(CONVERT(NEW.`headers` USING utf8mb4)), TIMESTAMPADD(MICROSECOND, UNIX_TIMESTAMP(NEW.`created_at`) * 1000000, '1970-01-01 00:00:00'), NULL, NULL);
END IF;
DROP TRIGGER IF EXISTS `golden_adopt_team`.`golden_relay_adopt_mark`;
CREATE TRIGGER `golden_adopt_team`.`golden_relay_adopt_mark` AFTER UPDATE ON `golden_adopt_team`.golden_relay FOR EACH ROW
IF NEW.status = 1 AND OLD.status <> 1 THEN
    UPDATE `golden_adopt_team`.`outbox_events` SET `status` = 'PUBLISHED', `published_at` = COALESCE(FROM_UNIXTIME(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', NEW.published_at) / 1000000), NOW(6)), `next_retry_at` = NULL WHERE `id` IN (CONVERT(NEW.event_id USING utf8mb4) COLLATE utf8mb4_general_ci, CONVERT(UPPER(NEW.event_id) USING utf8mb4) COLLATE utf8mb4_general_ci);
ELSEIF NEW.status IN (2, 3) AND OLD.status NOT IN (2, 3) THEN
    UPDATE `golden_adopt_team`.`outbox_events` SET `status` = 'FAILED', `retry_count` = NEW.attempts, `next_retry_at` = NULL WHERE `id` IN (CONVERT(NEW.event_id USING utf8mb4) COLLATE utf8mb4_general_ci, CONVERT(UPPER(NEW.event_id) USING utf8mb4) COLLATE utf8mb4_general_ci);
ELSEIF NEW.status = 0 AND OLD.status IN (2, 3) THEN
    UPDATE `golden_adopt_team`.`outbox_events` SET `status` = 'PENDING', `retry_count` = 0, `next_retry_at` = NULL WHERE `id` IN (CONVERT(NEW.event_id USING utf8mb4) COLLATE utf8mb4_general_ci, CONVERT(UPPER(NEW.event_id) USING utf8mb4) COLLATE utf8mb4_general_ci);
ELSEIF NEW.status = 0 AND NOT (NEW.attempts <=> OLD.attempts) THEN
    UPDATE `golden_adopt_team`.`outbox_events` SET `retry_count` = NEW.attempts, `next_retry_at` = FROM_UNIXTIME(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', NEW.next_attempt_at) / 1000000) WHERE `id` IN (CONVERT(NEW.event_id USING utf8mb4) COLLATE utf8mb4_general_ci, CONVERT(UPPER(NEW.event_id) USING utf8mb4) COLLATE utf8mb4_general_ci);
END IF;
DROP TRIGGER IF EXISTS `golden_adopt_team`.`golden_relay_adopt_mark_del`;
CREATE TRIGGER `golden_adopt_team`.`golden_relay_adopt_mark_del` AFTER DELETE ON `golden_adopt_team`.golden_relay FOR EACH ROW
IF OLD.status = 0 THEN
    UPDATE `golden_adopt_team`.`outbox_events` SET `status` = 'PUBLISHED', `published_at` = NOW(6), `next_retry_at` = NULL WHERE `id` IN (CONVERT(OLD.event_id USING utf8mb4) COLLATE utf8mb4_general_ci, CONVERT(UPPER(OLD.event_id) USING utf8mb4) COLLATE utf8mb4_general_ci);
END IF;
-- backfill ([PENDING])
INSERT INTO `golden_adopt_team`.golden_relay (event_id, topic, aggregate_id, event_type, aggregate_type, payload, headers, created_at, key_hash, partition_no)
    SELECT CONVERT(t.`id` USING utf8mb4), CONCAT(LOWER(CONVERT(t.`aggregate_type` USING utf8mb4)), '.events'), CONVERT(t.`aggregate_id` USING utf8mb4), CONVERT(t.`event_type` USING utf8mb4), CONVERT(t.`aggregate_type` USING utf8mb4), CONVERT(t.`payload` USING utf8mb4), `golden_adopt_team`.golden_relay_adopt_headers(CONVERT(t.`headers` USING utf8mb4)), TIMESTAMPADD(MICROSECOND, UNIX_TIMESTAMP(t.`created_at`) * 1000000, '1970-01-01 00:00:00'), NULL, NULL FROM `golden_adopt_team`.`outbox_events` AS t
    WHERE t.`status` = ? AND NOT EXISTS (SELECT 1 FROM `golden_adopt_team`.golden_relay AS r WHERE r.event_id = LOWER(CONVERT(t.`id` USING utf8mb4)) COLLATE utf8mb4_bin)
    ORDER BY t.`created_at`, t.`id`;
-- unlock
UNLOCK TABLES;
-- undo --drop-relay-table
DROP TRIGGER IF EXISTS `golden_adopt_team`.`golden_relay_adopt_forward`;
DROP TRIGGER IF EXISTS `golden_adopt_team`.`golden_relay_adopt_mark`;
DROP TRIGGER IF EXISTS `golden_adopt_team`.`golden_relay_adopt_mark_del`;
DROP FUNCTION IF EXISTS `golden_adopt_team`.`golden_relay_adopt_headers`;
DROP TABLE IF EXISTS golden_adopt_team.golden_relay;
DROP TABLE IF EXISTS golden_adopt_team.golden_relay_leases;
DROP TABLE IF EXISTS golden_adopt_team.golden_relay_relays;
DROP TABLE IF EXISTS golden_adopt_team.golden_relay_key_locks;
DROP TABLE IF EXISTS golden_adopt_team.golden_relay_cdc_slots;
DROP TABLE IF EXISTS golden_adopt_team.golden_relay_wal_slots;
DROP TABLE IF EXISTS golden_adopt_team.golden_relay_wal_discarded;
DROP TABLE IF EXISTS golden_adopt_team.golden_relay_installation;
DROP TABLE IF EXISTS golden_adopt_team.golden_relay_units;
DROP TABLE IF EXISTS golden_adopt_team.golden_relay_migrations;
