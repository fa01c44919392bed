"""Tests of the launchers, against fakes of what they drive (a fake Docker engine)."""
