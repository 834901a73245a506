remat-profile 2
measured 1
cpu AMD EPYC
threads 1
config 4 128 4 256 64 16 64 0 0 0
update 0.628824
cache 33554432
fwd ln1_stat 0.0806099996
fwdhot ln1_stat 0.0806099996
fwd ln1 0.0304660005
fwdhot ln1 0.0304660005
bwd ln1 0.133258
bwdhot ln1 0.133258
fwd qkv 1.595037
fwdhot qkv 1.595037
bwd qkv 3.295713
bwdhot qkv 3.295713
fw