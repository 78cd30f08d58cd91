"""The mahjong_pai_gow game: its rules, live step machine and par sheet."""
